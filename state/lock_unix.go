//go:build unix

package state

import (
	"os"
	"syscall"
)

// lockHeld says whether another process holds badger's lock on dir, by
// trying it and letting go at once. badger flocks the directory itself
// (acquireDirectoryLock opens dir); dir/LOCK only holds the owner's pid, and
// a probe of that file never conflicts with badger's lock.
func lockHeld(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return err == syscall.EWOULDBLOCK
	}
	// The probe's own lock; closing the file would drop it too.
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
