package acpclient

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/windows"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// sysProcAttr starts the peer in a process group of its own, as Setpgid
// does on unix: a Ctrl+C in the test's console is not the peer's.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// killedExitCode is the exit status of a peer whose job was terminated: 1,
// as os.Process.Kill gives on Windows. Unix reports -1, death by signal,
// instead.
const killedExitCode = 1

// peerGroup is the job object the peer runs in, which stands for its
// process group: what the peer starts joins the job, so terminating it ends
// them all. The job is made with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE and its
// handle is never closed: closing it would kill what the peer left running,
// which on unix lives until a kill, so it closes with the test process and
// takes the peer's leftovers with it. It is the proxy's job object
// (proxy.KillOnCloseJob).
type peerGroup struct {
	mu  sync.Mutex
	job windows.Handle // 0 until hold
}

// hold puts the peer, just started, in a new job object. A process the peer
// starts before that is outside the job: os/exec gives no way to resume a
// process started suspended.
func (g *peerGroup) hold(pid int) error {
	job, err := proxy.KillOnCloseJob(pid, "peer")
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.job = job
	g.mu.Unlock()
	return nil
}

// kill terminates the peer's job, or the peer alone before hold (a ctx
// that ended at once).
func (g *peerGroup) kill(peer *os.Process) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job == 0 {
		if err := peer.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("kill peer %d: %w", peer.Pid, err)
		}
		return nil
	}
	if err := windows.TerminateJobObject(g.job, killedExitCode); err != nil {
		return fmt.Errorf("terminate job object of peer %d: %w", peer.Pid, err)
	}
	return nil
}

// terminateSignal: Windows has no SIGTERM, so the peer ends as Close ends
// it, by its stdin's EOF and then its job's termination.
func (p *process) terminateSignal() error { return nil }
