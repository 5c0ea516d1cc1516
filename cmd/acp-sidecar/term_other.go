//go:build !linux

package main

import "os"

// isTerminal reports whether f is a character device, which outside Linux is
// as close as the standard library gets to asking for a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && fi.Mode()&os.ModeDevice != 0
}
