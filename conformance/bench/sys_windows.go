package bench

import (
	"fmt"
	"os"
)

// killPid terminates pid, which is what SIGKILL is on Windows.
func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("find process %d: %w", pid, err)
	}
	defer p.Release()
	return p.Kill()
}

// pollable returns stdin as it is, as cmd/acp-sidecar does on Windows:
// there is no non-blocking mode for an anonymous pipe, and closing one
// cancels its pending read.
func pollable(f *os.File) *os.File { return f }
