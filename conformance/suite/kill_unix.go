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
