package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/cmd/acp-sidecar/internal/sessionview"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// handoffCommand prints the kept-turn handoff of a session: exactly the
// text the next prompt to a fresh native session carries (DESIGN.md "Hand
// over"), and whether one is armed now.
func handoffCommand(s stdio) *cli.Command {
	return &cli.Command{
		Name:            "handoff",
		Usage:           "print the kept turns a fresh native session of SESSION would be handed",
		UsageText:       "acp-sidecar handoff [--budget BYTES] SESSION [--state-dir DIR]",
		HideHelpCommand: true,
		Flags: []cli.Flag{stateDirFlag(), storeFlag(),
			&cli.IntFlag{Name: "budget", Value: replay.DefaultBudget, Usage: "the handoff's size limit in bytes, as the sidecar's --handoff-budget"}},
		Action: func(c *cli.Context) error {
			a, err := readArgs(c)
			if err != nil || len(a.pos) != 1 {
				return usageError(c, err, "usage: acp-sidecar handoff [--budget BYTES] SESSION [--state-dir DIR]")
			}
			id := a.pos[0]
			return withStore(c.Context, a, func(ctx context.Context, st state.Store) error {
				sess, turns, err := sessionview.Read(ctx, st, id)
				if errors.Is(err, state.ErrNotFound) {
					return fmt.Errorf("no session %q in %s (acp-sidecar sessions lists them)", id, a.place())
				}
				if err != nil {
					return err
				}
				conv := replay.Conversation(sess, turns, sessionview.Lookup(ctx, st))
				h := replay.BuildHandoff(replay.Kept(conv), c.Int("budget"))
				if h.Text == "" {
					fmt.Fprintln(s.err, "acp-sidecar: the session has no kept turns to hand over")
					return nil
				}
				// The text names the agent behind each answer itself
				// (replay.BuildHandoff); this line says which one would read it.
				on := ""
				if sess.AgentName != "" {
					on = " on agent " + cell(sess.AgentName, 0)
				}
				if sess.HandoffPending {
					fmt.Fprintf(s.err, "acp-sidecar: armed: the next prompt%s carries this text\n", on)
				} else {
					fmt.Fprintf(s.err, "acp-sidecar: not armed: the native session%s holds the conversation; a rebuild would hand over this text\n", on)
				}
				fmt.Fprintln(s.out, h.Text)
				return nil
			})
		},
	}
}
