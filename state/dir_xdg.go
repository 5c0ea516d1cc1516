//go:build !windows

package state

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDir is where the store lives unless --state-dir says otherwise:
// $XDG_STATE_HOME/acp-sidecar, or ~/.local/state/acp-sidecar when
// XDG_STATE_HOME is unset or not absolute (the XDG base directory spec says to
// ignore relative values).
func DefaultDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "acp-sidecar"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return filepath.Join(home, ".local", "state", "acp-sidecar"), nil
}
