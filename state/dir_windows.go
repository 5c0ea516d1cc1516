package state

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDir is where the store lives unless --state-dir says otherwise:
// %LocalAppData%\acp-sidecar (os.UserCacheDir on Windows). It is not
// %AppData% (os.UserConfigDir), which roams with the user's profile: a
// store of memory-mapped files and a socket belongs to this machine.
// XDG_STATE_HOME is not read on Windows.
func DefaultDir() (string, error) {
	local, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return filepath.Join(local, "acp-sidecar"), nil
}
