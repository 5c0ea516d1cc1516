//go:build unix && !linux

package pgtest

import "syscall"

// serverAttr runs the server as cred's user. Without a parent-death
// signal, a server whose starter was killed outlives it until Stop.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
