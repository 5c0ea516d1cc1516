//go:build unix

package acpclient

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// sysProcAttr starts the peer in a process group of its own, whose id is
// its pid.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// peerGroup is the peer's process group. The kernel keeps it; there is
// nothing to hold.
type peerGroup struct{}

func (*peerGroup) hold(int) error { return nil }

// kill SIGKILLs the group of peer.
func (*peerGroup) kill(peer *os.Process) error { return killGroup(peer.Pid) }

func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pid, err)
	}
	return nil
}

// terminateSignal sends the peer SIGTERM, as a user's quit does.
func (p *process) terminateSignal() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM peer %d: %w", p.cmd.Process.Pid, err)
	}
	return nil
}
