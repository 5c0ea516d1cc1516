package pgtest

import (
	"errors"
	"syscall"
)

// errWindows is what Start says on Windows. The server listens on a unix
// socket directory (-k), is stopped with SIGINT, which Windows cannot send,
// and steps down from root by uid; none of that is Windows's. pgtest
// builds there so that what imports it (bench, the fleet's tests) builds.
var errWindows = errors.New("pgtest: a test PostgreSQL server needs unix (a socket directory, SIGINT to stop it); it does not run on Windows")

// credential is never set on Windows: there is no root to step down from
// (os.Geteuid is -1), so Start never asks for the postgres user.
type credential struct{ Uid, Gid uint32 }

// toolAttr and serverAttr ask nothing of the process on Windows.
func toolAttr(*credential) *syscall.SysProcAttr   { return nil }
func serverAttr(*credential) *syscall.SysProcAttr { return nil }

// checkPlatform fails on Windows: see errWindows.
func checkPlatform() error { return errWindows }
