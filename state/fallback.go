package state

import (
	"errors"
	"fmt"
)

// Fallback is the way on after Open failed with ErrCorrupt: a memory store for
// this run, and a notice for the log and `show` that says what happened and
// where the damaged files are. Nothing in dir is moved, renamed or deleted, so
// the files stay as they were for inspection or recovery.
func Fallback(dir string, cause error) (Store, string) {
	if errors.Is(cause, ErrNoSpace) {
		return NewMemory(), fmt.Sprintf("state store in %s not opened (%v); recording in memory for this run only. "+
			"Free some disk space; nothing in %s was changed.", dir, cause, dir)
	}
	return NewMemory(), fmt.Sprintf("state store in %s cannot be opened (%v); "+
		"recording in memory for this run only. The damaged files are untouched in %s; "+
		"move them aside to start a fresh store.", dir, cause, dir)
}
