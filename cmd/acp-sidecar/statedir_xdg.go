//go:build !windows

package main

import "os"

// defaultStateDir follows the XDG base directory rules.
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return d + "/acp-sidecar"
	}
	if h, err := os.UserHomeDir(); err == nil {
		return h + "/.local/state/acp-sidecar"
	}
	return os.TempDir() + "/acp-sidecar"
}
