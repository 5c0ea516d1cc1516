package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// `acp-sidecar delete SESSION...` forgets sessions from the shell, as
// session/delete does from an editor (DESIGN.md "A session's whole life").
// It opens the store as `show` does (state.Open: through a running
// sidecar's socket, or badger itself), so it works while a sidecar owns the
// store. state.Store.DeleteSession returns once the session's values have
// left every file of the state dir, and so does each line this prints.

// deleteTimeout bounds the wait for one delete. A delete that rewrites a
// large store takes a second or so; one that finds no backend at all waits
// in the queue of this process's store.
const deleteTimeout = time.Minute

const deleteUsage = "usage: acp-sidecar delete SESSION [SESSION...] [--state-dir DIR]"

func deleteCommand(s stdio) *cli.Command {
	return &cli.Command{
		Name:            "delete",
		Usage:           "forget recorded sessions: record, config and turns leave the store and the disk",
		UsageText:       "acp-sidecar delete SESSION [SESSION...] [--state-dir DIR]",
		HideHelpCommand: true,
		Flags:           []cli.Flag{stateDirFlag(), storeFlag()},
		Action: func(c *cli.Context) error {
			a, err := readArgs(c)
			if err == nil && a.json {
				err = errors.New("delete takes no --json")
			}
			if err != nil || len(a.pos) == 0 {
				return usageError(c, err, deleteUsage)
			}
			st, err := openForReading(c.Context, a)
			if err != nil {
				return &exitError{code: 1, err: storeError(a, err)}
			}
			failed := false
			for _, id := range a.pos {
				if err := deleteSession(c.Context, st, a, id); err != nil {
					fmt.Fprintf(s.err, "acp-sidecar: %v\n", err)
					failed = true
					continue
				}
				fmt.Fprintf(s.out, "deleted %s\n", cell(id, 0))
			}
			if err := st.Close(); err != nil {
				fmt.Fprintf(s.err, "acp-sidecar: close store %s: %v\n", a.place(), err)
				failed = true
			}
			if failed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

// deleteSession deletes one session and explains a failure the user can act
// on.
func deleteSession(ctx context.Context, st state.Store, a readCmdArgs, id string) error {
	dir := a.place()
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	err := st.DeleteSession(ctx, id)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, state.ErrDeleted):
		return fmt.Errorf("no session %q in %s: it was deleted before", cell(id, 0), dir)
	case errors.Is(err, state.ErrNotFound):
		return fmt.Errorf("no session %q in %s (acp-sidecar sessions lists them)", cell(id, 0), dir)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the delete of %q was not confirmed within %v: the store in %s is busy or unreachable; "+
			"it may still land while this command exits, so run it again to check (%w)", cell(id, 0), deleteTimeout, dir, err)
	}
	return storeError(a, err)
}
