package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
)

// execAgent lets the agent have the terminal: a terminal-login launch
// wants a person, not ACP (run). Windows has no exec to replace this
// process with the agent, so the agent runs as a child on our own stdin,
// stdout and stderr, and its exit status becomes ours. Ctrl+C reaches every
// process on the console: it is the agent's to act on, and is noticed here
// only so that Go's default, exiting at once, does not leave the agent
// running without the status it will exit with.
func execAgent(argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return &exitError{code: 127, err: fmt.Errorf("agent %q: %w", argv[0], err)}
	}
	interrupts := make(chan os.Signal, 1) // never read: a notified signal is not fatal
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	cmd := exec.Command(path, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return &exitError{code: 126, err: fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)}
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); err != nil && !errors.As(err, &ee) {
		return &exitError{code: 1, err: fmt.Errorf("wait for %s: %w", strings.Join(argv, " "), err)}
	}
	return exitCode(cmd.ProcessState.ExitCode())
}
