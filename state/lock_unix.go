//go:build unix

package state

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockHeld says whether another process holds badger's lock on dir, by
// trying it (badger flocks dir/LOCK) and letting go at once.
func lockHeld(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return err == syscall.EWOULDBLOCK
	}
	// The probe's own lock; closing the file would drop it too.
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
