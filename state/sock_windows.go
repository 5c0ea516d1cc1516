package state

import (
	"os"
	"path/filepath"
)

// socketTempDir is the private directory for sockets of state dirs too
// deep for their own. Windows's temp dir is already the user's own
// (%LocalAppData%\Temp), and os.Getuid is -1 there, so the name carries no
// user.
func socketTempDir() string { return filepath.Join(os.TempDir(), "acp-sidecar") }

// restrictSocket does nothing on Windows: a mode is no ACL there (os.Chmod
// sets only the read-only attribute), and the socket, a reparse point,
// inherits its directory's ACL, which under %LocalAppData% admits only its
// user, SYSTEM and the administrators.
func restrictSocket(string) error { return nil }
