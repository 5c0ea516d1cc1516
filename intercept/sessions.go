package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Sessions is what the sidecar does to a session on the client's behalf,
// as a slash command, a `_sidecar/*` method, the emulation's close, delete
// and fork, or the switchboard's move: the rebuilds (through Run), the
// rollbacks, the reports, and what the record does for a close and a
// delete (ends.go). It runs its record work on the record's goroutine (do).
// The loads, resumes and lists the record answers are the reopens'
// (reopen.go), a fleet's leases are the leases' (leases.go), and a record
// outside the record's memory is the records' (records.go).
type Sessions struct {
	rec     *record.Recorder
	rb      *rebuild.Rebuilder
	led     *ledger.Ledger
	log     *slog.Logger
	cfg     *Config
	leases  *leases  // a fleet's, for the status
	records *records // a session brought back, and what a deleted one's forks keep
}

// Reset gives a session a fresh native session with the same config
// (rebuild.Reset).
func (o *Sessions) Reset(ctx context.Context, sid string) (rebuild.Report, error) {
	return o.rb.Run(ctx, rebuild.Reset{Session: sid})
}

// RestoreOriginal puts the session's immutable original back on it
// (rebuild.RestoreOriginal).
func (o *Sessions) RestoreOriginal(ctx context.Context, sid string) (rebuild.Report, error) {
	return o.rb.Run(ctx, rebuild.RestoreOriginal{Session: sid})
}

// AcceptConfig lifts a block: the session goes on with what the agent has.
func (o *Sessions) AcceptConfig(ctx context.Context, sid string) error {
	if _, err := rebuild.SnapshotIn(ctx, o.rec, sid); err != nil {
		return err
	}
	o.led.Update(func(f *ledger.Flight) { f.Sessions.SetBlocked(sid, nil) })
	o.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(sid, nil) })
	return o.rec.Do(ctx, func(ctx context.Context) {
		if s := o.rec.Session(sid); s != nil {
			s.Rec.Blocked = nil
			o.rec.PutSession(ctx, s)
			o.rec.Flush(ctx)
		}
	})
}

// Status is the `_sidecar/status` result.
func (o *Sessions) Status(ctx context.Context, sid string) (map[string]any, error) {
	var res map[string]any
	err := o.rec.OnSession(ctx, sid, func(_ context.Context, s *record.Session) {
		kept := 0
		for _, t := range s.Turns {
			if t.Status != state.TurnRolledBack {
				kept++
			}
		}
		res = map[string]any{
			"sessionId": sid, "nativeSessionId": s.Rec.NativeID, "nativeHistory": s.Rec.NativeHistory,
			"live": rebuild.ConfigMap(s.Rec.Live), "original": rebuild.NilOr(s.Rec.Original), "blocked": s.Rec.Blocked,
			"turns": len(s.Turns), "keptTurns": kept,
		}
		if o.cfg.Name != "" {
			res["agent"] = o.cfg.Name
		}
		if shared, why, fleet := o.leases.Sharing(sid); fleet {
			res["shared"] = shared
			if !shared {
				res["notShared"] = why
			}
		}
	})
	return res, err
}

// StatusText is `/sidecar-status`.
func (o *Sessions) StatusText(ctx context.Context, sid string) (string, error) {
	st, err := o.Status(ctx, sid)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "acp-sidecar: session %s, native session %v", sid, st["nativeSessionId"])
	if a, ok := st["agent"].(string); ok {
		fmt.Fprintf(&b, " on agent %s", a)
	}
	fmt.Fprintf(&b, "\nconfig: %s\nturns: %v (%v kept)", rebuild.ConfigLine(st["live"].(map[string]string)), st["turns"], st["keptTurns"])
	if blocked, ok := st["blocked"].(*state.Blocked); ok && blocked != nil {
		fmt.Fprintf(&b, "\nblocked: %s", blocked.Reason)
	}
	if why, ok := st["notShared"].(string); ok {
		fmt.Fprintf(&b, "\nnot shared: %s", why)
	}
	return b.String(), nil
}

// Rewind takes back the last n turns.
func (o *Sessions) Rewind(ctx context.Context, sid string, n int) (rebuild.RollbackReport, error) {
	count := 0
	if err := o.rec.OnSession(ctx, sid, func(_ context.Context, s *record.Session) { count = len(rebuild.Visible(s)) }); err != nil {
		return rebuild.RollbackReport{}, err
	}
	if n < 1 || n > count {
		return rebuild.RollbackReport{}, wire.Refuse(proxy.CodeInvalidParams, "cannot rewind %d turns: the conversation has %d", n, count)
	}
	return o.Rollback(ctx, sid, count-n)
}

// Rollback keeps turns 1..keep of the current conversation and takes the
// rest back (rebuild.Rollback).
func (o *Sessions) Rollback(ctx context.Context, sid string, keep int) (rebuild.RollbackReport, error) {
	p := &rebuild.Rollback{Session: sid, Keep: keep}
	res, err := o.rb.Run(ctx, p)
	if err != nil {
		return rebuild.RollbackReport{}, err
	}
	p.Report.Report = res
	return p.Report, nil
}

// Fork starts a new client session from a parent's conversation up to its
// kept turn at (all of it when at is 0), with the parent's config restored
// and the lineage recorded. A fork of the whole conversation on an agent
// that forks is the agent's session/fork; any other is a fresh native
// session, handed the inherited turns with its first prompt.
func (o *Sessions) Fork(ctx context.Context, parent string, at int) (rebuild.Report, error) {
	var snap rebuild.Snapshot
	var fail error
	whole := false // the fork takes the whole conversation
	err := o.rec.Do(ctx, func(ctx context.Context) {
		p := o.rec.Session(parent)
		if p == nil {
			fail = wire.Refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", parent)
			return
		}
		n := len(rebuild.Visible(p))
		if at == 0 {
			at = n
		}
		if at < 0 || at > n {
			fail = wire.Refuse(proxy.CodeInvalidParams, "atTurn %d is out of range: the session has %d turns", at, n)
			return
		}
		whole = at == n
		snap = rebuild.SnapshotOfRecord(&p.Rec)
		snap.Client, snap.Orig = "", nil // the fork's are its own
		snap.Live = record.CloneConfig(o.led.TargetOr(parent, p.Rec.Live))
	})
	if err != nil {
		return rebuild.Report{}, fmt.Errorf("fork %s: %w", parent, err)
	}
	if fail != nil {
		return rebuild.Report{}, fail
	}
	child := rebuild.NewClientID()
	return o.rb.Run(ctx, &rebuild.Fork{Parent: parent, Child: child, At: at, Whole: whole, Snap: snap})
}

// ForkHere forks the whole conversation of parent for an agent without
// session/fork (EmulationOps), and returns the fork's id and the
// session/fork result that tells the client about it.
func (o *Sessions) ForkHere(ctx context.Context, parent string) (string, []byte, error) {
	rep, err := o.Fork(ctx, parent, 0)
	if err != nil {
		return "", nil, err
	}
	snap, err := rebuild.SnapshotIn(ctx, o.rec, rep.SessionID)
	if err != nil {
		return "", nil, fmt.Errorf("fork %s: %w", parent, err)
	}
	result := wire.Encode(map[string]string{"sessionId": rep.SessionID})
	return rep.SessionID, o.rb.WithPickers(result, nil, snap.Live), nil
}

// Recover rebuilds a session whose native session died with the agent, by
// the crash ladder (rebuild.Recover).
func (o *Sessions) Recover(ctx context.Context, sid string) error {
	_, err := o.rb.Run(ctx, rebuild.Recover{Session: sid})
	return err
}

// TakeBack takes back the turn of a prompt the agent never received: the
// ledger no longer holds the prompt (Flight.Unsent), and its turn has not
// begun.
func (o *Sessions) TakeBack(sid string) {
	o.rec.Queue(func(ctx context.Context) { o.unbegin(ctx, sid) })
}

// Again sends a client request again, whose error answer the lifeline
// dropped (rebuild.Rebuilder.Again).
func (o *Sessions) Again(ctx context.Context, line []byte) error { return o.rb.Again(ctx, line) }

// unbegin takes back the turn of a prompt the agent never received: it
// will be recorded when the prompt is sent again. A handoff it carried is
// owed again.
func (o *Sessions) unbegin(ctx context.Context, sid string) {
	o.led.Update(func(f *ledger.Flight) { f.Sessions.TurnTakenBack(sid) })
	s := o.rec.Session(sid)
	if s == nil {
		return
	}
	t, running := s.DropLastTurn()
	if t == nil {
		return
	}
	handoff := t.HandoffDelivered
	if running {
		o.rec.Text().TakeAnswer(t.NativeID) // its text so far, none of it the agent's answer
	}
	if handoff {
		s.Rec.Handoff = nil
		if n := s.Rec.LastNative(); n != nil {
			n.Handoff = nil // it never got it
		}
		o.rb.Arm(s)
		o.rec.PutSession(ctx, s)
	}
}

// Lend readies a session to leave this agent (rebuild.Lend).
func (o *Sessions) Lend(ctx context.Context, sid string) (done func(moved bool), err error) {
	return o.rb.Lend(ctx, sid)
}

// Adopt takes over a session another agent ran, from the record: a fresh
// native session with the same cwd, MCP servers and directories; this
// agent's start-up settings; the mode carried over when this agent offers
// the same mode id (models and other options stay with their agent); and a
// handoff of every kept turn, whichever agent ran it, armed for the next
// prompt. What did not carry is reported, not blocking: the user chose the
// move, and the agent's own values are a sound place to start.
func (o *Sessions) Adopt(ctx context.Context, sid string) (rebuild.SwitchReport, error) {
	p := &rebuild.Adopt{Session: sid}
	if _, err := o.rb.Run(ctx, p); err != nil {
		o.rec.Do(context.WithoutCancel(ctx), func(context.Context) { o.rec.SetSession(sid, nil) })
		o.led.Update(func(f *ledger.Flight) { f.Sessions.Forget(sid) })
		return rebuild.SwitchReport{}, err
	}
	return p.Report, nil
}

// ConfigOptions is a session's configOptions list as the agent last
// reported it, for a move that finds the session already where it should be.
func (o *Sessions) ConfigOptions(ctx context.Context, sid string) (json.RawMessage, error) {
	var out json.RawMessage
	err := o.rec.OnSession(ctx, sid, func(_ context.Context, s *record.Session) { out = rebuild.OptionsOf(s.Rec.Live) })
	return out, err
}

// Revive brings back, from the record, a session this agent ran before it
// was started again: the session is rebuilt on its next request, by the
// same ladder as after a crash (resume, load, or new with a handoff).
func (o *Sessions) Revive(ctx context.Context, sid string) error {
	var err error
	if derr := o.rec.Do(ctx, func(ctx context.Context) { _, err = o.records.revive(ctx, sid) }); derr != nil {
		return derr
	}
	return err
}
