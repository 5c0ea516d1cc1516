//go:build unix

package bench

import (
	"os"
	"syscall"
)

// killPid SIGKILLs pid.
func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// pollable returns stdin in a form whose pending read ends when it is closed,
// the same way cmd/acp-sidecar treats the sidecar's stdin, so the client side
// of both relays goes through the same runtime poller.
func pollable(f *os.File) *os.File {
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		return f
	}
	return os.NewFile(uintptr(fd), f.Name())
}
