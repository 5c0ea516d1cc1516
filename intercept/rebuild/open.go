package rebuild

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// When the client opens a session (session/new, load, resume, fork), the
// record holds the agent's response until it is written (holds), and then
// lets it go with what the sidecar owes the client for that open: its own
// slash commands when the agent has sent no list for the native session
// since the open (the agent's later list is merged with them, commands.go),
// and for a load or resume the pickers the result lacks (pickers.go).
//
// Agents drop the chosen model and mode after their own session/load
// (agents.md), and may return a fork on their defaults. A load or resume of
// a session this process already knows, and a fork of one, therefore get
// the session's (the parent's) config back before the client sees the
// result, restored as any rebuild restores it, and failing closed.

// Opened lets an open's held response go, once the record has it.
func Opened(b *Rebuilder, ctx context.Context, s *record.Session, req *record.Request, ev record.Event, result json.RawMessage, before *state.Config) {
	reopened := req.Method == wire.SessionLoad || req.Method == wire.SessionResume
	if before != nil && (reopened || req.Method == wire.SessionFork) {
		restoreAfterOpen(b, ctx, s, ev, result, before)
		return
	}
	line := ev.Raw
	if reopened {
		line = withResult(line, WithPickers(result, s.Rec.Baseline, s.Rec.Live))
	}
	b.rec.Flush(ctx)
	ev.Release(append([][]byte{line}, b.cfg.Commands(s.Rec.NativeID, s.Rec.ClientID)...)...)
}

// restoreAfterOpen puts the config the session had before the agent's own
// load or resume back on it (openRestorePlan), then lets the response go.
func restoreAfterOpen(b *Rebuilder, ctx context.Context, s *record.Session, ev record.Event, result json.RawMessage, before *state.Config) {
	// Async: only the marking is done here; the plan's settle says
	// whatever went wrong, with the response it lets go.
	_, _ = b.Run(ctx, openRestorePlan(b, s, ev, result, before))
}

// withResult is a response line with its result replaced.
func withResult(line []byte, result json.RawMessage) []byte {
	out, err := wire.SetPath(line, result, "result")
	if err != nil {
		return line // not an object: it goes as it came
	}
	return out
}
