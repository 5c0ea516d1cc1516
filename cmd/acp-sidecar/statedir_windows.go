package main

import (
	"os"
	"path/filepath"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// defaultStateDir is state.DefaultDir, %LocalAppData%\acp-sidecar, so that
// the sidecar records where sessions and show look; Windows has no XDG
// directories. Without %LocalAppData% it falls back to the temp dir, as the
// XDG rules do without a home.
func defaultStateDir() string {
	if d, err := state.DefaultDir(); err == nil {
		return d
	}
	return filepath.Join(os.TempDir(), "acp-sidecar")
}
