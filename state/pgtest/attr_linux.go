package pgtest

import "syscall"

// serverAttr runs the server as cred's user, and makes it die with the
// process that started it, even one killed at once.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}
