//go:build unix

package state

import "syscall"

// umask sets the process umask for a test that checks file modes; the tests
// using it do not run in parallel.
func umask(m int) int { return syscall.Umask(m) }
