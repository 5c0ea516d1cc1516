package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Sessions is what the sidecar does to a session on the client's behalf,
// as a slash command, a `_sidecar/*` method, a stage's emulation or the
// switchboard's move: the rebuilds (through Run), the rollbacks, the
// reports, and what the record does for a close, a delete and the agent's
// death. It runs its record work on the record's goroutine (do).
type Sessions struct {
	rec  *record.Recorder
	sc   Sidecar // the relay (Core.Bind)
	rb   *rebuild.Rebuilder
	led  *ledger.Ledger
	life *life.Life
	log  *slog.Logger
	cfg  *Config
	// leases are the fleet store's (nil for a store of one host): a
	// session is served here only while this sidecar holds its lease.
	leases state.Leaser
}

// lease takes session sid's lease in a fleet's store before the client's
// load or resume of it is served here (--takeover: even from a live
// holder). A lease another sidecar holds is refused with the holder's name.
// A copy of the session this sidecar kept after it lost the lease is
// dropped, so that the session is rebuilt from what the holder since wrote.
// A database out of reach does not refuse the open: the session goes on
// here, not shared, and its writes wait for the database.
func (o *Sessions) lease(ctx context.Context, sid string) error {
	if o.leases == nil {
		return nil
	}
	_, wasLost := o.leases.Lost(sid)
	err := o.leases.Acquire(ctx, sid, o.cfg.Takeover)
	switch {
	case errors.Is(err, state.ErrUnavailable):
		o.log.Warn("the fleet's store is out of reach; the session is served here, not shared, until it is back", "session", sid, "err", err)
		return nil
	case err != nil:
		return wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: %v", err)
	case wasLost:
		return o.rec.Do(ctx, func(ctx context.Context) {
			o.rec.SetSession(sid, nil)
			o.led.Update(func(f *ledger.Flight) { f.Sessions.Forget(sid) })
		})
	}
	return nil
}

// fleet says whether sessions are a fleet's, with leases: each prompt is
// then confirmed with the database before it runs (confirm).
func (o *Sessions) fleet() bool { return o.leases != nil }

// confirm checks, before a prompt on session sid goes to the agent, that
// this sidecar still holds the session's lease in the fleet's store: a
// lease another host took is refused with its name, and the turn never
// starts here.
func (o *Sessions) confirm(ctx context.Context, sid string) error {
	if o.leases == nil || sid == "" {
		return nil
	}
	if err := o.leases.Confirm(ctx, sid); err != nil {
		return wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: %v", err)
	}
	return nil
}

// lost is the error for request f on a session another sidecar took the
// lease of: this one no longer serves it (nil while it does). Without a
// fleet it costs a nil check.
func (o *Sessions) lost(f *proxy.Frame) error {
	if o.leases == nil {
		return nil
	}
	if le, lost := o.leases.Lost(wire.SessionIDOf(f)); lost {
		return wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: %v", le)
	}
	return nil
}

// Reset gives a session a fresh native session with the same config
// (rebuild.ResetPlan).
func (o *Sessions) Reset(ctx context.Context, sid string) (rebuild.Report, error) {
	return o.rb.Run(ctx, rebuild.Reset{Session: sid})
}

// RestoreOriginal puts the session's immutable original back on it
// (rebuild.RestoreOriginalPlan).
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
		if o.leases != nil {
			shared, why := o.leases.Sharing(sid)
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

// forkHere implements LifelineOps: a fork of the whole conversation, and
// the session/fork result that tells the client about it.
func (o *Sessions) forkHere(ctx context.Context, parent string) (string, []byte, error) {
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
// the crash ladder (rebuild.RecoverPlan).
func (o *Sessions) Recover(ctx context.Context, sid string) error {
	_, err := o.rb.Run(ctx, rebuild.Recover{Session: sid})
	return err
}

// reopen brings back a session the record knows for a client's load or
// resume, and returns the result to answer with; nil means the session is
// live here and the request can go to the agent as it is. For a load that
// is emulated (or a v2 resume with replayFrom), the recorded history goes
// to the client first, as the agent would have sent it. raw is the
// client's request.
func (o *Sessions) reopen(ctx context.Context, sid, method string, raw []byte) ([]byte, error) {
	v := wire.Version(o.life.Caps().Protocol)
	history := wire.WantsHistory(v, method, wire.Member(raw, "params"))
	if err := o.lease(ctx, sid); err != nil {
		return nil, err
	}
	o.led.Update(func(f *ledger.Flight) { f.Sessions.Reopen(sid) })
	live := false
	var gone error
	err := o.rec.Do(ctx, func(ctx context.Context) {
		held, err := o.revive(ctx, sid)
		if held {
			live = !o.led.IsStale(sid)
		}
		gone = err
	})
	if err != nil {
		return nil, err
	}
	if gone != nil && !errors.Is(gone, state.ErrNotFound) {
		// The record may know the session but could not be read: the
		// agent's own answer would be a wrong "not found".
		return nil, fmt.Errorf("reopen %s: %w", sid, gone)
	}
	if live {
		caps := o.life.Caps()
		if method == wire.SessionResume && !caps.Resume || method == wire.SessionLoad && !caps.Load {
			return o.reopenLive(ctx, sid, v, history)
		}
		return nil, nil
	}
	if !o.led.IsStale(sid) {
		return nil, state.ErrNotFound
	}
	p := &rebuild.Reopen{Session: sid, Method: method, History: history}
	if _, err := o.rb.Run(ctx, p); err != nil {
		return nil, err
	}
	return o.rb.ReopenResult(&p.Got), nil
}

// reopenLive answers a load or resume of a session this process holds live
// on an agent that cannot do it itself, as the sidecar promised in
// initialize: the session is already where the client wants it, so a resume
// is its config, and a load (history) is the recorded history, then its
// config.
func (o *Sessions) reopenLive(ctx context.Context, sid string, v wire.Version, history bool) ([]byte, error) {
	var lines [][]byte
	snap, err := rebuild.SnapshotIn(ctx, o.rec, sid)
	if err != nil {
		return nil, err
	}
	o.led.Update(func(f *ledger.Flight) { f.Natives.Opening(snap.Native) }) // an open, though the agent hears of none: the sidecar's commands follow it
	var turns []state.Turn
	if history {
		if err := o.rec.OnSession(ctx, sid, func(ctx context.Context, s *record.Session) {
			turns = replay.Visible(&s.Rec, o.rec.FullTurns(ctx, s))
		}); err != nil {
			return nil, err
		}
	}
	lines = rebuild.HistoryUpdates(v, sid, turns)
	for _, line := range lines {
		rebuild.SendOwn(o.sc, o.log, proxy.AgentToClient, line)
	}
	// The config as the record has it now: the options with their current
	// values, the pickers on theirs (Rebuilder.WithPickers builds them all).
	return o.rb.WithPickers([]byte("{}"), nil, snap.Live), nil
}

// listSessions answers session/list from the record, for agents that
// cannot: the cwd filter, pages of 50 by an opaque cursor, and each
// session's title: the one the agent last gave it (session_info_update),
// else its first prompt line.
func (o *Sessions) listSessions(ctx context.Context, id, raw []byte) []byte {
	var p struct {
		Params struct {
			Cwd    string `json:"cwd"`
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: session/list: "+err.Error())
	}
	all, err := o.cfg.Store.Sessions(ctx)
	if err != nil {
		return proxy.ErrorResponse(id, proxy.CodeInternalError, "acp-sidecar: cannot read the session record: "+err.Error())
	}
	start := 0
	if p.Params.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(p.Params.Cursor, "acp-sidecar:"))
		if err != nil || n < 0 {
			return proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: unknown cursor")
		}
		start = n
	}
	type info struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		Title     string `json:"title,omitempty"`
		UpdatedAt string `json:"updatedAt,omitempty"`
	}
	var match []state.Summary
	for _, s := range all {
		if p.Params.Cwd == "" || s.Cwd == p.Params.Cwd {
			match = append(match, s)
		}
	}
	const page = 50
	res := map[string]any{"sessions": []info{}}
	var list []info
	for i := start; i < len(match) && i < start+page; i++ {
		s := match[i]
		title := s.Title
		// Turns that cannot be read leave the title empty: a listing is
		// not refused for one session's title.
		if title == "" {
			if turns, err := o.cfg.Store.Turns(ctx, s.ID); err == nil && len(turns) > 0 {
				title = rebuild.FirstLine(turns[0].PromptText)
			}
		}
		list = append(list, info{SessionID: s.ID, Cwd: s.Cwd, Title: title, UpdatedAt: s.LastActivity.UTC().Format(time.RFC3339)})
	}
	if list != nil {
		res["sessions"] = list
	}
	if start+page < len(match) {
		res["nextCursor"] = "acp-sidecar:" + strconv.Itoa(start+page)
	}
	b := wire.Encode(res)
	return wire.Response(id, b)
}

// session/close ends a session on the agent's side (DESIGN.md "A session's
// whole life"). The record says closed, and the session leaves the
// sessions this process keeps live: a crash marks none of them stale, so
// nothing rebuilds, resumes or loads a closed session behind the client's
// back. The client's own load or resume reopens it from the record, with
// its config restored, as any session this process does not hold.

// closeHere closes a session the agent cannot close, for the lifeline.
func (o *Sessions) closeHere(ctx context.Context, sid string) error {
	if err := o.rec.Do(ctx, func(ctx context.Context) { o.Closed(ctx, sid) }); err != nil {
		return fmt.Errorf("close %s: %w", sid, err)
	}
	return nil
}

// Closed records that sid is closed. A session the record does not
// know is not the sidecar's: nothing to mark.
func (o *Sessions) Closed(ctx context.Context, sid string) {
	s := o.rec.Session(sid)
	if s == nil {
		old, err := o.cfg.Store.Session(ctx, sid)
		if err != nil {
			return
		}
		s = &record.Session{Rec: *old, Started: true}
	}
	now := o.cfg.Now()
	s.Rec.Closed = &now
	o.rec.PutSession(ctx, s)
	o.rec.Flush(ctx)
	o.rec.SetSession(sid, nil)
	o.led.Update(func(f *ledger.Flight) { f.Sessions.Close(sid) })
	o.log.Info("session closed", "session", sid)
}

// session/delete forgets a session (DESIGN.md "A session's whole life"):
// its config layers, turns, handoff text, native history and lineage leave
// the store, and by the time the client has its answer, the disk
// (state.Store.DeleteSession). The delete goes on to the agent when the
// agent can delete, and the record is forgotten once the agent has done
// it; else the sidecar answers it, once the record is gone. Deleting a
// session the sidecar never knew succeeds, as the protocol asks.
//
// A fork keeps what it inherited from a deleted parent: the inherited
// turns are copied into the fork's own record, ahead of its own turns, so
// its conversation, its handoff and `show` read as before. Its lineage
// still names the parent, which no longer resolves.

// deleteHere forgets a session for an agent that cannot delete, for the
// lifeline.
func (o *Sessions) deleteHere(ctx context.Context, sid string) error {
	var err error
	if derr := o.rec.Do(ctx, func(ctx context.Context) { err = o.Forget(ctx, sid) }); derr != nil {
		return fmt.Errorf("delete %s: %w", sid, derr)
	}
	return err
}

// Forget removes sid from the store and from this process. It runs on the
// recorder's goroutine.
func (o *Sessions) Forget(ctx context.Context, sid string) error {
	if err := o.keepInheritance(ctx, sid); err != nil {
		return fmt.Errorf("delete %s: keep what its forks inherited: %w", sid, err)
	}
	if err := o.cfg.Store.DeleteSession(ctx, sid); err != nil && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("delete %s: %w", sid, err)
	}
	if s := o.rec.Session(sid); s != nil {
		o.rec.Text().TakeAnswer(s.Rec.NativeID) // a running turn's text goes with it
	}
	o.rec.SetSession(sid, nil)
	o.led.Update(func(f *ledger.Flight) { f.Sessions.Forget(sid) })
	o.log.Info("session deleted", "session", sid)
	return nil
}

// keepInheritance copies what each fork of parent inherited from it into
// the fork's own record, before parent is deleted. The forks of such a
// fork count the copied turns in their fork point.
func (o *Sessions) keepInheritance(ctx context.Context, parent string) error {
	sums, err := o.cfg.Store.Sessions(ctx)
	if err != nil {
		return err
	}
	lineage := map[string]*state.Session{} // every session with a lineage, by id
	for _, sum := range sums {
		if sum.ID == parent {
			continue
		}
		rec := o.recordOf(ctx, sum.ID)
		if rec != nil && rec.Lineage != nil {
			lineage[sum.ID] = rec
		}
	}
	for id, rec := range lineage {
		if rec.Lineage.ParentID != parent {
			continue
		}
		inherited := replay.Inherited(rec, o.rb.Lookup(ctx))
		if len(inherited) == 0 {
			continue
		}
		if err := o.adoptTurns(ctx, id, rec, inherited); err != nil {
			return err
		}
		for gid, g := range lineage {
			if g.Lineage.ParentID == id {
				g.Lineage.ForkTurn += len(inherited)
				if err := o.putRecord(ctx, gid, g); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// adoptTurns puts inherited ahead of the fork id's own turns, in the store
// and in memory.
func (o *Sessions) adoptTurns(ctx context.Context, id string, rec *state.Session, inherited []state.Turn) error {
	var own []state.Turn
	if s := o.rec.Session(id); s != nil {
		own = o.rec.FullTurns(ctx, s)
	} else {
		var err error
		if own, err = o.cfg.Store.Turns(ctx, id); err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
	}
	k := len(inherited)
	turns := make([]state.Turn, 0, k+len(own))
	for i, t := range inherited {
		t.Index = i + 1
		turns = append(turns, t)
	}
	for _, t := range own {
		t.Index += k
		turns = append(turns, t)
	}
	if rec.ContextFrom > 0 {
		rec.ContextFrom += k
	}
	if c := rec.Compaction; c != nil {
		c.Turn += k // the turn it ran in moved with the fork's own turns
	}
	for i := range turns {
		if err := o.cfg.Store.PutTurn(ctx, id, &turns[i]); err != nil {
			return err
		}
	}
	if s := o.rec.Session(id); s != nil {
		s.MoveTurns(turns, k)
	}
	return o.putRecord(ctx, id, rec)
}

// recordOf is a session's record: the one this process holds, else the
// store's; nil when neither has it.
func (o *Sessions) recordOf(ctx context.Context, id string) *state.Session {
	if s := o.rec.Session(id); s != nil {
		return &s.Rec
	}
	rec, err := o.cfg.Store.Session(ctx, id)
	if err != nil {
		return nil
	}
	return rec
}

// putRecord writes a record recordOf returned: through the session this
// process holds, else straight to the store.
func (o *Sessions) putRecord(ctx context.Context, id string, rec *state.Session) error {
	if s := o.rec.Session(id); s != nil {
		o.rec.PutSession(ctx, s) // rec is &s.Rec
		return nil
	}
	return o.cfg.Store.PutSession(ctx, rec)
}

// takeBack takes back the turn of a prompt the agent never received: the
// ledger no longer holds the prompt (Flight.Unsent), and its turn has not
// begun.
func (o *Sessions) takeBack(sid string) {
	o.rec.Queue(func(ctx context.Context) { o.unbegin(ctx, sid) })
}

// again implements LifelineOps.
func (o *Sessions) again(ctx context.Context, line []byte) error { return o.rb.Again(ctx, line) }

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
	if derr := o.rec.Do(ctx, func(ctx context.Context) { _, err = o.revive(ctx, sid) }); derr != nil {
		return derr
	}
	return err
}

// revive loads a session the recorder does not hold from the store and
// marks it stale; it reports whether the session was already held. It runs
// on the recorder's goroutine.
func (o *Sessions) revive(ctx context.Context, sid string) (held bool, err error) {
	if o.rec.Session(sid) != nil {
		return true, nil
	}
	old, err := o.cfg.Store.Session(ctx, sid)
	if err != nil {
		return false, err
	}
	s := &record.Session{Rec: *old, Started: true}
	if turns, err := o.cfg.Store.Turns(ctx, sid); err == nil {
		s.Turns = turns
	}
	o.rec.SetSession(sid, s)
	// No turn runs on a session brought back from the store: one that reads
	// running died with the process that ran it (a crash, or another host
	// of a fleet), and is marked so.
	for i := range s.Turns {
		if t := &s.Turns[i]; t.Status == state.TurnRunning {
			t.Status = state.TurnInterrupted
			o.rec.PutTurn(ctx, s, t)
		}
	}
	o.led.Update(func(f *ledger.Flight) {
		f.Remap(sid, old.NativeID, f.Life())
		f.Sessions.MarkStale(sid)
	})
	return false, nil
}
