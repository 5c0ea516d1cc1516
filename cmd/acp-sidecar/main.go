// Command acp-sidecar sits where an editor would launch an ACP agent and
// relays between them, keeping a record of each session so that it can
// rebuild the agent's side after a reset, crash or rollback.
//
//	acp-sidecar [flags] -- AGENT [ARGS...]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGPIPE)
	defer stop()
	code := runMain(ctx, os.Args, stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

// stdio are the process's streams, passed in so tests can run the CLI in
// process.
type stdio struct {
	in       *os.File
	out, err *os.File
}

// exitError carries an exit status through urfave/cli's error path.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }
