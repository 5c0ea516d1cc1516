package rebuild

import (
	"context"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// The rebuilds a client's command, a crash or a move starts, each a Plan
// for Run (plan.go); the ones a held response starts are in held.go. Each
// reads top to bottom in Run's order: its shape, what it captures, how it
// gets its native session, which config, how it settles, what follows.

// Reset gives a session a fresh native session with the same config: the
// conversation is cleared on purpose, the client's id stays.
type Reset struct{ Session string }

func (p Reset) Shape() Shape {
	return Shape{What: "reset", Session: p.Session, Mark: Busy, Death: AgainOwing}
}

func (p Reset) capture(ctx context.Context, b *Rebuilder) (Snapshot, error) {
	snap, err := SnapshotIn(ctx, b.rec, p.Session)
	if err == nil && snap.Running {
		err = wire.Refuse(proxy.CodeBusy, "a turn is running; cancel it or wait for it to end, then reset")
	}
	return snap, err
}

func (p Reset) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	return b.fresh(ctx, "reset", a)
}

func (p Reset) target(b *Rebuilder, a *Attempt) *state.Config { return b.owed(a) }

func (p Reset) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	return b.settle(ctx, p.Session, b.made(state.MadeReset, a), a.Out, func(s *record.Session) {
		s.Rec.ContextFrom = len(s.Turns) + 1
		s.Rec.Handoff = nil
	})
}

func (p Reset) done(context.Context, *Rebuilder, *Attempt) {}

// Rollback keeps turns 1..Keep of the current conversation and takes the
// rest back: they are marked rolled_back, never deleted, and a fresh
// native session gets the kept turns with the next prompt. A rollback
// never uses session/load or resume: the agent's own history holds the
// turns taken back.
//
// On an agent known to fork at a message (life.Habits.ForksAtMessage), the
// fresh native session is instead the agent's own fork of the current one
// at the last kept turn's message (forkAt): it keeps the real history, tool
// results and all, and needs no handoff. Any failure of that fork falls
// back to a fresh session with the handoff, and the log says why.
type Rollback struct {
	Session string
	Keep    int
	// Report is the kept count and the turns taken back, once Run is done.
	Report RollbackReport

	at string // the message a native rewind forks at; "" for none
}

func (p *Rollback) Shape() Shape {
	return Shape{What: "rollback", Session: p.Session, Mark: Busy, Death: AgainOwing}
}

func (p *Rollback) capture(ctx context.Context, b *Rebuilder) (Snapshot, error) {
	var snap Snapshot
	var fail error
	err := b.rec.Do(ctx, func(ctx context.Context) {
		s := b.rec.Session(p.Session)
		switch {
		case s == nil:
			fail = wire.Refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", p.Session)
			return
		case s.Turn != nil:
			fail = wire.Refuse(proxy.CodeBusy, "a turn is running; a rollback waits until it ends or is cancelled")
			return
		}
		vis := Visible(s)
		if p.Keep < 0 || p.Keep > len(vis) {
			fail = wire.Refuse(proxy.CodeInvalidParams, "keepTurns %d is out of range: the conversation has %d turns", p.Keep, len(vis))
			return
		}
		snap = snapshotOf(s)
		p.Report.Kept = p.Keep
		for _, t := range vis[p.Keep:] {
			p.Report.RolledBack = append(p.Report.RolledBack, FirstLine(t.PromptText))
		}
		p.at = forkAt(s, vis, p.Keep, b.life.Caps())
	})
	if err != nil {
		return snap, fmt.Errorf("rollback %s: %w", p.Session, err)
	}
	return snap, fail
}

func (p *Rollback) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	if p.at != "" && !b.led.IsStale(p.Session) {
		native, catalog, err := b.eng.forkNativeAt(ctx, p.Session, a.Snap.Native, a.Snap, p.at)
		if err == nil {
			a.native, a.Catalog, a.path = native, catalog, "fork"
			b.log.Info("rewound natively: the agent forked the session at the last kept message", "session", p.Session, "native", native, "messageId", p.at)
			return nil
		}
		if agentLost(err) {
			return err
		}
		b.log.Warn("the agent's fork at a message failed; rewinding with a fresh session and the handoff", "session", p.Session, "messageId", p.at, "err", err)
	}
	return b.fresh(ctx, "rollback", a)
}

func (p *Rollback) target(b *Rebuilder, a *Attempt) *state.Config { return b.owed(a) }

func (p *Rollback) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	return b.settle(ctx, p.Session, b.made(state.MadeRewind, a), a.Out, func(s *record.Session) {
		vis := Visible(s)
		after := s.Rec.ContextFrom - 1 // the last turn kept, by index
		if p.Keep > 0 {
			after = vis[p.Keep-1].Index
		}
		for _, t := range vis[p.Keep:] {
			t.Status = state.TurnRolledBack
		}
		// The store marks them (memory may hold them without their text).
		if err := b.cfg.Store.RollBack(b.ctx, p.Session, max(after, 0)); err != nil {
			b.log.Warn("record rollback", "session", p.Session, "err", err)
		}
		if a.path == "fork" {
			s.Rec.HandoffPending = false // the fork has the kept turns itself
			return
		}
		b.Arm(s)
	})
}

func (p *Rollback) done(context.Context, *Rebuilder, *Attempt) {}

// forkAt is the message a rollback of s to its first keep visible turns
// can fork the current native session at, natively: the agent forks at a
// message, and the last kept turn ran on the current native session, whose
// history therefore holds every kept turn (natively, or in the handoff its
// first prompt carried), with a messageId the agent gave. "" when any of
// that fails, and the rollback hands over the kept turns instead.
func forkAt(s *record.Session, vis []*state.Turn, keep int, caps life.Caps) string {
	if !caps.Fork || !caps.Habits.ForksAtMessage || keep < 1 || s.Rec.HandoffPending {
		return ""
	}
	last := vis[keep-1]
	if last.NativeID != s.Rec.NativeID || last.MessageID == "" {
		return ""
	}
	return last.MessageID
}

// RestoreOriginal applies the session's immutable original to its current
// native session, and records those values as the client's explicit
// selections. A session without an original is refused and left
// unchanged: nothing reconstructs one from mutable data.
type RestoreOriginal struct{ Session string }

func (p RestoreOriginal) Shape() Shape {
	return Shape{What: "restore-original", Session: p.Session, Mark: Busy, Death: Again}
}

func (p RestoreOriginal) capture(ctx context.Context, b *Rebuilder) (Snapshot, error) {
	if err := b.rec.Do(ctx, func(ctx context.Context) { b.rec.FixOriginal(ctx, p.Session) }); err != nil {
		return Snapshot{}, fmt.Errorf("restore-original %s: %w", p.Session, err)
	}
	snap, err := SnapshotIn(ctx, b.rec, p.Session)
	if err == nil && snap.Orig == nil {
		err = wire.Refuse(proxy.CodeInvalidParams, "session %s has no recorded original config (it was recorded before originals existed, or imported); nothing was changed", p.Session)
	}
	return snap, err
}

func (p RestoreOriginal) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	a.native, a.Catalog = a.Snap.Native, a.Snap.Live
	if !b.led.IsStale(p.Session) {
		return nil
	}
	// The agent died under an earlier attempt: the session needs a native
	// session again before the original goes onto it.
	return b.bringBack(ctx, a)
}

func (p RestoreOriginal) target(_ *Rebuilder, a *Attempt) *state.Config { return a.Snap.Orig }

func (p RestoreOriginal) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	return b.settle(ctx, p.Session, b.made(state.MadeCrash, a), a.Out, func(s *record.Session) {
		if a.path == "new" {
			b.Arm(s)
		}
		if len(a.Out.failed) > 0 {
			return
		}
		orig, now := a.Snap.Orig, b.cfg.Now()
		for _, o := range orig.Options {
			s.Rec.Overrides = append(s.Rec.Overrides, state.Override{OptionID: o.ID, Category: o.Category, Value: o.Current, At: now})
		}
		for _, l := range []struct {
			field string
			leg   *state.Legacy
		}{{"model", orig.Model}, {"mode", orig.Mode}} {
			if l.leg != nil && orig.ByCategory(l.field) == nil {
				s.Rec.Overrides = append(s.Rec.Overrides, state.Override{OptionID: l.field, Category: l.field, Value: wire.String(l.leg.Current), At: now})
			}
		}
	})
}

func (p RestoreOriginal) done(context.Context, *Rebuilder, *Attempt) {}

// Recover is the crash ladder: a session whose native session died with
// the agent is rebuilt by session/resume if the agent offers it, then
// session/load (its replay kept from the client, which has the history),
// then session/new with the kept turns handed over. Whichever rung holds,
// the config is restored after: a native load does not keep it.
type Recover struct{ Session string }

func (p Recover) Shape() Shape {
	return Shape{What: "recovery", Session: p.Session, Mark: Busy, Death: AgainOwing}
}

func (p Recover) capture(ctx context.Context, b *Rebuilder) (Snapshot, error) {
	if !b.led.IsStale(p.Session) {
		return Snapshot{}, errNothingToDo // another request rebuilt it meanwhile
	}
	return SnapshotIn(ctx, b.rec, p.Session)
}

func (p Recover) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	return b.bringBack(ctx, a)
}

func (p Recover) target(b *Rebuilder, a *Attempt) *state.Config { return b.owed(a) }

func (p Recover) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	return b.settle(ctx, p.Session, b.made(state.MadeCrash, a), a.Out, func(s *record.Session) {
		// A native session the agent brought back still lacks a handoff
		// that never reached its predecessor.
		if a.path == "new" || s.Rec.HandoffPending {
			b.Arm(s)
		}
	})
}

func (p Recover) done(_ context.Context, b *Rebuilder, a *Attempt) {
	b.log.Info("session rebuilt after the agent's exit", "session", p.Session, "path", a.path)
}

// Reopen brings back, for a client's load or resume (Method), a session
// whose native session is not live here, by the ladder. A native load the
// client asked for sends the agent's replay to the client, under its own
// id; a resume sends none, and after a resume or a new session the sidecar
// sends the recorded history itself when the client asked for it
// (History: a load, or a v2 resume with replayFrom, wire.WantsHistory).
type Reopen struct {
	Session, Method string
	History         bool
	// Got is the attempt that held, once Run is done: the caller answers
	// the client's request from it (Rebuilder.ReopenResult).
	Got Attempt

	lines [][]byte // the recorded history the sidecar sends
}

func (p *Reopen) Shape() Shape {
	return Shape{What: "reopen", Session: p.Session, Mark: Busy, Death: AgainOwing}
}

func (p *Reopen) capture(ctx context.Context, b *Rebuilder) (Snapshot, error) {
	return SnapshotIn(ctx, b.rec, p.Session)
}

func (p *Reopen) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	return b.reopen(ctx, a, p.History)
}

func (p *Reopen) target(b *Rebuilder, a *Attempt) *state.Config { return b.owed(a) }

func (p *Reopen) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	return b.settle(ctx, p.Session, b.made(state.MadeReopen, a), a.Out, func(s *record.Session) {
		s.Reopened()
		if a.path == "new" {
			b.Arm(s)
		}
		if !a.replayed {
			var turns []state.Turn
			if p.History {
				turns = replay.Visible(&s.Rec, b.rec.FullTurns(b.ctx, s))
			}
			p.lines = HistoryUpdates(b.version(), p.Session, turns)
		}
	})
}

func (p *Reopen) done(_ context.Context, b *Rebuilder, a *Attempt) {
	p.Got = *a
	for _, line := range p.lines {
		SendOwn(b.sc, b.log, proxy.AgentToClient, line)
	}
	b.log.Info("session reopened", "session", p.Session, "method", p.Method, "path", a.path)
}

// Fork starts the client session Child from Parent's conversation, as Snap
// captured it (its first At turns), with the parent's config restored and
// the lineage recorded. A fork of the Whole conversation on an agent that
// forks is the agent's own session/fork, which keeps the real history,
// tool results and all, where a handoff would carry a summary; any other
// is a fresh native session, handed the inherited turns with its first
// prompt.
type Fork struct {
	Parent, Child string
	At            int
	Whole         bool
	Snap          Snapshot

	agentForks bool // the agent forked the native session itself
}

// Shape: nobody knows the child yet, so nothing marks it.
func (p *Fork) Shape() Shape {
	return Shape{What: "fork", Session: p.Child, Mark: Unmarked, Death: Again}
}

func (p *Fork) capture(context.Context, *Rebuilder) (Snapshot, error) { return p.Snap, nil }

func (p *Fork) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	// The agent cannot fork a native session that died with it.
	p.agentForks = p.Whole && b.life.Caps().Fork && p.Snap.Native != "" && !b.led.IsStale(p.Parent)
	var err error
	if p.agentForks {
		a.native, a.Catalog, err = b.eng.forkNative(ctx, p.Child, p.Snap.Native, p.Snap)
		a.path = "fork"
	} else {
		a.native, a.Catalog, err = b.eng.newNative(ctx, p.Child, p.Snap)
		a.path = "new"
	}
	if err != nil {
		return fmt.Errorf("fork %s: %w", p.Parent, err)
	}
	snap := p.Snap
	err = b.rec.Do(ctx, func(ctx context.Context) {
		now := b.cfg.Now()
		s := &record.Session{Started: true}
		s.Rec = state.Session{
			ClientID: p.Child, NativeID: a.native, NativeHistory: []string{a.native}, Agent: b.cfg.Agent, AgentName: b.cfg.Name,
			Cwd: snap.Cwd, McpServers: snap.Mcp, AdditionalDirectories: snap.Dirs, Meta: snap.Meta, NewParams: snap.Params, Created: now,
			Baseline: record.CloneConfig(a.Catalog), Live: a.Catalog, Original: record.CloneConfig(snap.Live),
			Lineage: &state.Lineage{ParentID: p.Parent, ForkTurn: p.At},
		}
		s.Born = now
		b.rec.SetSession(p.Child, s)
		b.rec.PutSession(ctx, s)
	})
	if err != nil {
		return fmt.Errorf("fork %s: record the child: %w", p.Parent, err)
	}
	return nil
}

func (p *Fork) target(*Rebuilder, *Attempt) *state.Config { return p.Snap.Live }

func (p *Fork) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	return b.settle(ctx, p.Child, b.made(state.MadeFork, a), a.Out, func(s *record.Session) {
		if !p.agentForks {
			b.Arm(s) // the fresh session lacks the conversation: hand it over
		}
	})
}

func (p *Fork) done(context.Context, *Rebuilder, *Attempt) {}

// Adopt takes over a session another agent ran, from its record: a fresh
// native session with the same cwd, MCP servers and directories; this
// agent's start-up settings; the mode carried over when this agent offers
// the same mode id (models and other options stay with their agent); and a
// handoff of every kept turn, whichever agent ran it, armed for the next
// prompt. What did not carry is reported, not blocking: the user chose the
// move, and the agent's own values are a sound place to start. The target
// may die under the move: it starts again on the restarted target, from
// the same record.
type Adopt struct {
	Session string
	// Report says what the move carried, once Run is done.
	Report SwitchReport

	old     *state.Session // the record as the other agent left it
	setErrs []state.SetError
}

func (p *Adopt) Shape() Shape {
	return Shape{What: "switch", Session: p.Session, Mark: Busy, Death: Again}
}

func (p *Adopt) capture(ctx context.Context, b *Rebuilder) (Snapshot, error) {
	sid := p.Session
	var err error
	if p.old, err = b.cfg.Store.Session(ctx, sid); err != nil {
		return Snapshot{}, fmt.Errorf("adopt %s: read the record: %w", sid, err)
	}
	turns, err := b.cfg.Store.Turns(ctx, sid)
	if err != nil {
		return Snapshot{}, fmt.Errorf("adopt %s: read the turns: %w", sid, err)
	}
	err = b.rec.Do(ctx, func(context.Context) {
		s := &record.Session{Rec: *p.old, Turns: turns, Started: true}
		for i := range s.Turns {
			record.Lighten(&s.Turns[i])
		}
		s.ThinOut()
		b.rec.SetSession(sid, s)
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("adopt %s: %w", sid, err)
	}
	// What another agent made of the session (its native session, its
	// config) stays with it; the client's inputs come along.
	snap := SnapshotOfRecord(p.old)
	snap.Native, snap.Live, snap.Orig = "", nil, nil
	return snap, nil
}

func (p *Adopt) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	return b.fresh(ctx, "adopt", a)
}

func (p *Adopt) target(b *Rebuilder, a *Attempt) *state.Config {
	var target *state.Config
	target, p.setErrs = settingsTarget(a.Catalog, b.cfg.Settings)
	p.Report = SwitchReport{SessionID: p.Session, Agent: b.cfg.Name, NativeSessionID: a.native}
	p.Report.Carried, p.Report.NotCarried = carry(p.old.Live, target, b.cfg.Name)
	return target
}

func (p *Adopt) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	// A value this agent did not take is a note, not a block (see above).
	for _, f := range a.Out.failed {
		p.Report.NotCarried = append(p.Report.NotCarried, fmt.Sprintf("%s=%s: %s", f.Field, wire.Unquote(f.Want), f.Reason))
	}
	for _, e := range p.setErrs {
		p.Report.NotCarried = append(p.Report.NotCarried, fmt.Sprintf("%s=%s (start-up setting): %s", e.OptionID, e.Value, e.Err))
	}
	out := a.Out
	out.failed = nil
	res := b.settle(ctx, p.Session, b.made(state.MadeSwitch, a), out, func(s *record.Session) {
		s.Rec.AgentName, s.Rec.Agent = b.cfg.Name, b.cfg.Agent
		s.Rec.Baseline = record.CloneConfig(a.Catalog)
		s.Rec.SetErrors = append(s.Rec.SetErrors, p.setErrs...)
		b.Arm(s)
		p.Report.KeptTurns = 0
		for _, t := range replay.Kept(b.conversation(s)) {
			if !replay.IsSummary(&t) {
				p.Report.KeptTurns++ // a compaction's summary stands for turns, and is not one
			}
		}
	})
	p.Report.Config = res.Config
	return res
}

func (p *Adopt) done(_ context.Context, b *Rebuilder, a *Attempt) {
	p.Report.Options = a.Out.OptionsRaw
	if p.Report.Options == nil {
		p.Report.Options = OptionsOf(a.Out.Catalog)
	}
	b.log.Info("session moved to this agent", "session", p.Session, "agent", b.cfg.Name, "native", a.native)
}
