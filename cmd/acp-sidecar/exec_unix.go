//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// execAgent replaces this process with the agent.
func execAgent(argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return &exitError{code: 127, err: fmt.Errorf("agent %q: %w", argv[0], err)}
	}
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return &exitError{code: 126, err: fmt.Errorf("exec %s: %w", strings.Join(argv, " "), err)}
	}
	return nil
}
