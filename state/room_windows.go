package state

import (
	"errors"
	"fmt"

	"golang.org/x/sys/windows"
)

// freeSpace is how many bytes of dir's volume this process may still fill:
// GetDiskFreeSpaceEx's free bytes available to the caller, which a disk
// quota lowers, as f_bavail is on unix.
func freeSpace(dir string) (uint64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return avail, nil
}

// isNoSpace says whether err is a full disk, which Windows says in two
// ways; syscall.ENOSPC is never among them there.
func isNoSpace(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}
