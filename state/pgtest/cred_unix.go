//go:build unix

package pgtest

import "syscall"

// credential is the user initdb and postgres run as, when the tests run as
// root.
type credential = syscall.Credential

// toolAttr runs initdb as cred's user.
func toolAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// checkPlatform says whether pgtest can run here: on unix, it can.
func checkPlatform() error { return nil }
