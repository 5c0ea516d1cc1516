//go:build unix

package main

import (
	"io"
	"os"
	"syscall"
)

// pollable returns stdin in a form whose pending read ends when it is closed,
// so the relay's client reader can be stopped and waited for. A plain
// os.Stdin blocks in read(2) until the editor writes or exits.
func pollable(f *os.File) io.Reader {
	if f != os.Stdin {
		return f
	}
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		return f
	}
	return os.NewFile(uintptr(fd), "stdin")
}
