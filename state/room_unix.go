//go:build unix

package state

import (
	"errors"
	"fmt"
	"syscall"
)

// freeSpace is how many bytes of dir's file system an unprivileged
// process may still fill (statfs's f_bavail).
func freeSpace(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// isNoSpace says whether err is a full disk.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
