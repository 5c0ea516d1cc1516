//go:build unix

package proxy

import (
	"context"
	"os"
	"syscall"
	"time"
)

// processTree is what a Process keeps of its agent's tree on unix: nothing.
// The tree is found by parent pid each time it is signalled (descendants),
// and the agent stays in our process group, so a group kill reaches it too.
type processTree struct{}

// hold has nothing to set up on unix; see processTree.
func (*processTree) hold(int) error { return nil }

// release has nothing to let go of on unix.
func (*processTree) release() error { return nil }

// stopSteps are the signals a shutdown sends the tree, one per grace
// period, while the agent runs: SIGTERM then SIGKILL after a quiet first
// step (the agent's stdin closed), or only SIGKILL when the tree already
// got a signal we received.
func stopSteps(sig os.Signal) []os.Signal {
	if sig != nil {
		return []os.Signal{syscall.SIGKILL}
	}
	return []os.Signal{syscall.SIGTERM, syscall.SIGKILL}
}

// reapOrphans waits, within a bound, until the orphans the agent left (now
// our children, see AdoptOrphans) have died and been reaped, so "the
// sidecar has exited" means its whole tree is gone. A process killed with
// SIGKILL can take a moment in the kernel's exit path.
func (p *Process) reapOrphans(ctx context.Context) {
	if !p.spec.Orphans {
		return
	}
	deadline := time.Now().Add(reapBound)
	for {
		left := descendants(os.Getpid())
		for _, pid := range left {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WNOHANG, nil) // ours to reap once adopted; ECHILD otherwise
		}
		if len(descendants(os.Getpid())) == 0 || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// signalTree signals the agent and all its descendants. The tree is read
// before anything is signalled, so a child that is re-parented as its parent
// dies is still reached.
func (p *Process) signalTree(sig os.Signal) {
	pids := descendants(p.Pid())
	if p.spec.Orphans {
		pids = descendants(os.Getpid())
	}
	alive := true
	select {
	case <-p.done:
		// The agent itself is reaped; its pid may belong to someone else now.
		alive = false
	default:
		if !p.spec.Orphans {
			pids = append([]int{p.Pid()}, pids...)
		}
	}
	for _, pid := range pids {
		if pid == p.Pid() && !alive {
			continue
		}
		if proc, err := os.FindProcess(pid); err == nil {
			proc.Signal(sig)
		}
	}
}
