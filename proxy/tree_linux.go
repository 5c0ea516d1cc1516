//go:build linux

package proxy

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr asks the kernel to signal the agent when the sidecar dies, so a
// sidecar killed alone does not leave its agent running. The agent stays in
// our process group (no Setpgid), so a group kill reaches it too.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// descendants lists every process below pid, found by parent pid in /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces: the
		// fields we want follow the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// AdoptOrphans makes this process the reaper of its orphaned descendants
// (PR_SET_CHILD_SUBREAPER). An agent that dies leaves children re-parented to
// us instead of to init, so a shutdown can still find and stop them. It is a
// property of the whole process: only the CLI calls it, once.
func AdoptOrphans() error {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}
