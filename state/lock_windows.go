package state

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// lockHeld says whether another process holds badger's lock on dir. On
// Windows badger takes no LockFileEx lock a probe could try: it holds
// dir/LOCK open with no sharing and delete-on-close (acquireDirectoryLock
// in its dir_windows.go), so the file exists only while it is held, and
// opening it for reading fails with a sharing violation then. The probe's
// handle is closed at once.
func lockHeld(dir string) bool {
	p, err := windows.UTF16PtrFromString(filepath.Join(dir, "LOCK"))
	if err != nil {
		return false
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return errors.Is(err, windows.ERROR_SHARING_VIOLATION)
	}
	windows.CloseHandle(h)
	return false
}
