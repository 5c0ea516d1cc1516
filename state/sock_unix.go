//go:build unix

package state

import (
	"fmt"
	"os"
	"path/filepath"
)

// socketTempDir is the private directory for sockets of state dirs too
// deep for their own: one per user, as the temp dir may be shared.
func socketTempDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("acp-sidecar-%d", os.Getuid()))
}

// restrictSocket lets only the owner connect to the socket at path.
func restrictSocket(path string) error { return os.Chmod(path, 0o600) }
