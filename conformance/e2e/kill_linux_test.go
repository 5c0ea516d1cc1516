package e2e

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// killAndWait sends SIGKILL to each of pids and waits, up to bound, until
// every one is dead with all its threads, so that nothing it held, such as
// its end of the sidecar's pipes, is open any more. What the sidecar writes
// to the agent after that surely never reached it (DESIGN.md: such a
// request is held and sent again). The wait is on a pidfd, opened before the
// kill, so a pid reused meanwhile cannot fool it and nothing polls: a pidfd
// becomes readable when the whole thread group has exited, while the
// sidecar, the parent, may not have reaped it yet.
func killAndWait(t testing.TB, bound time.Duration, pids ...int) {
	t.Helper()
	var fds, alive []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // it exited since it was listed (codex starts short-lived helpers): nothing to kill
		}
		if err != nil {
			t.Fatalf("pidfd_open %d: %v", pid, err)
		}
		fds, alive = append(fds, fd), append(alive, pid)
	}
	pids = alive
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("kill -9 %d: %v", pid, err)
		}
	}
	deadline := time.Now().Add(bound)
	for i, fd := range fds {
		for {
			left := time.Until(deadline)
			if left < 0 {
				left = 0
			}
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds()))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				t.Fatalf("poll the pidfd of %d: %v", pids[i], err)
			}
			if n == 0 {
				t.Fatalf("pid %d still alive %v after SIGKILL", pids[i], bound)
			}
			break
		}
	}
}

// killTree kills pid and every process below it, found by parent pid, and
// waits until all are dead. An agent is in the sidecar's process group
// (DESIGN.md, "Processes"), so a group kill would take the sidecar down too;
// this is what a crash of the agent's whole tree looks like to the sidecar.
// It returns the pids it killed.
func killTree(t testing.TB, bound time.Duration, pid int) []int {
	t.Helper()
	tree := append([]int{pid}, descendantsOf(pid)...)
	killAndWait(t, bound, tree...)
	return tree
}
