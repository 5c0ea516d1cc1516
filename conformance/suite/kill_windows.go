package suite

import (
	"errors"
	"fmt"
	"os"
)

// kill terminates pid, which is what SIGKILL is on Windows; one already
// gone is not an error.
func kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil // no such process: gone already
	}
	defer p.Release()
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	return nil
}

// quit has no goroutine dump to ask for on Windows, which has no SIGQUIT.
func quit(int) error { return errors.New("no SIGQUIT on Windows") }
