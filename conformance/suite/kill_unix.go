//go:build unix

package suite

import (
	"errors"
	"syscall"
)

// kill SIGKILLs pid; one already gone is not an error.
func kill(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// quit asks pid for a goroutine dump: a Go program writes every
// goroutine's stack to its stderr on SIGQUIT, and exits.
func quit(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
