package rebuild

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
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
	line := bridged(b, ev.Raw)
	if reopened {
		line = withResult(ev.Raw, b.WithPickers(result, s.Rec.Baseline, s.Rec.Live))
	}
	if req.Method == wire.SessionNew {
		s.Shown = true
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

// An agent's own session/load or resume can fail for a session the record
// holds whole: gemini-cli 0.61.0 answers -32603 for a session it made a
// moment before. The client would get that error, and a user who reopens
// the conversation in the editor would lose it, though the sidecar can
// answer: it does what it does for a session an earlier process recorded.
// The agent gets a fresh native session with the session's config and the
// kept turns armed; for a load, the client gets the recorded history; and
// the answer is a success, under the client's id.

// OpenFailed takes over the held error response ev of a load or resume of
// s, which the agent failed with agentErr, and says whether it did.
func OpenFailed(b *Rebuilder, ctx context.Context, s *record.Session, ev record.Event, agentErr json.RawMessage) bool {
	env, err := proxy.Scan(ev.Raw)
	if err != nil {
		return false // it was scanned on its way in; unreadable now, its error stands
	}
	id := append([]byte(nil), env.ID...)
	sid, method := s.Rec.ClientID, ev.Req.Method
	b.log.Warn("the agent failed the client's "+method+" of a session the record holds; answering it from the record on a fresh native session",
		"session", sid, "native", s.Rec.NativeID, "agentError", string(agentErr))
	// Async: the attempts run on the record's own goroutine pool, and
	// the plan's done (or the failure below) lets the response go.
	_, _ = b.Run(ctx, absorbPlan(b, snapshotOf(s), method, id, ev))
	return true
}

// bridged is a session result's response line with the pickers the
// client's dialect lacks (Rebuilder.Bridge); the line the agent wrote, to
// the byte, when the client lacks none.
func bridged(b *Rebuilder, line []byte) []byte {
	var msg struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil || wire.IsNull(msg.Result) {
		return line
	}
	if out := b.Bridge(msg.Result); !bytes.Equal(out, msg.Result) {
		return withResult(line, out)
	}
	return line
}

// withResult is a response line with its result replaced.
func withResult(line []byte, result json.RawMessage) []byte {
	out, err := wire.SetPath(line, result, "result")
	if err != nil {
		return line // not an object: it goes as it came
	}
	return out
}
