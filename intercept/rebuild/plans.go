package rebuild

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// The nine rebuilds, each a Plan for Run (rebuild.go). Every plan takes its
// capture before the fresh native session exists, so nothing the session
// reports can change what is restored (DESIGN.md "Rebuilding a native
// session", step 1), and every one restores model, then mode, then the
// rest, failing closed, through the same engine.

// ResetPlan gives a session a fresh native session with the same config:
// the conversation is cleared on purpose, the client's id stays.
func ResetPlan(b *Rebuilder, sid string) Plan {
	return Plan{
		what: "reset", made: state.MadeReset, sid: sid, busy: true, owes: true,
		read: func(ctx context.Context) (Snapshot, error) {
			snap, err := SnapshotIn(ctx, b.rec, sid)
			if err == nil && snap.Running {
				err = wire.Refuse(proxy.CodeBusy, "a turn is running; cancel it or wait for it to end, then reset")
			}
			return snap, err
		},
		native: b.fresh("reset"),
		target: b.owed,
		after: func(s *record.Session, _ *Attempt) {
			s.Rec.ContextFrom = len(s.Turns) + 1
			s.Rec.Handoff = nil
		},
	}
}

// RollbackPlan keeps turns 1..keep of the current conversation and takes
// the rest back: they are marked rolled_back, never deleted, and a fresh
// native session gets the kept turns with the next prompt. A rollback
// never uses session/load or resume: the agent's own history holds the
// turns taken back. rep gets the kept count and the turns taken back.
//
// On an agent known to fork at a message (life.Habits.ForksAtMessage), the
// fresh native session is instead the agent's own fork of the current one
// at the last kept turn's message (forkAt): it keeps the real history, tool
// results and all, and needs no handoff. Any failure of that fork falls
// back to a fresh session with the handoff, and the log says why.
func RollbackPlan(b *Rebuilder, sid string, keep int, rep *RollbackReport) Plan {
	var at string // the message a native rewind forks at; "" for none
	return Plan{
		what: "rollback", made: state.MadeRewind, sid: sid, busy: true, owes: true,
		read: func(ctx context.Context) (Snapshot, error) {
			var snap Snapshot
			var fail error
			err := b.rec.Do(ctx, func(ctx context.Context) {
				s := b.rec.Session(sid)
				switch {
				case s == nil:
					fail = wire.Refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid)
					return
				case s.Turn != nil:
					fail = wire.Refuse(proxy.CodeBusy, "a turn is running; a rollback waits until it ends or is cancelled")
					return
				}
				vis := Visible(s)
				if keep < 0 || keep > len(vis) {
					fail = wire.Refuse(proxy.CodeInvalidParams, "keepTurns %d is out of range: the conversation has %d turns", keep, len(vis))
					return
				}
				snap = snapshotOf(s)
				rep.Kept = keep
				for _, t := range vis[keep:] {
					rep.RolledBack = append(rep.RolledBack, FirstLine(t.PromptText))
				}
				at = forkAt(s, vis, keep, b.life.Caps())
			})
			if err != nil {
				return snap, fmt.Errorf("rollback %s: %w", sid, err)
			}
			return snap, fail
		},
		native: func(ctx context.Context, a *Attempt) error {
			if at != "" && !b.led.IsStale(sid) {
				native, catalog, err := b.eng.forkNativeAt(ctx, sid, a.Snap.Native, a.Snap, at)
				if err == nil {
					a.native, a.Catalog, a.path = native, catalog, "fork"
					b.log.Info("rewound natively: the agent forked the session at the last kept message", "session", sid, "native", native, "messageId", at)
					return nil
				}
				if agentLost(err) {
					return err
				}
				b.log.Warn("the agent's fork at a message failed; rewinding with a fresh session and the handoff", "session", sid, "messageId", at, "err", err)
			}
			return b.fresh("rollback")(ctx, a)
		},
		target: b.owed,
		after: func(s *record.Session, a *Attempt) {
			vis := Visible(s)
			after := s.Rec.ContextFrom - 1 // the last turn kept, by index
			if keep > 0 {
				after = vis[keep-1].Index
			}
			for _, t := range vis[keep:] {
				t.Status = state.TurnRolledBack
			}
			// The store marks them (memory may hold them without their text).
			if err := b.cfg.Store.RollBack(b.ctx, sid, max(after, 0)); err != nil {
				b.log.Warn("record rollback", "session", sid, "err", err)
			}
			if a.path == "fork" {
				s.Rec.HandoffPending = false // the fork has the kept turns itself
				return
			}
			b.Arm(s)
		},
	}
}

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

// RestoreOriginalPlan applies the session's immutable original to its
// current native session, and records those values as the client's
// explicit selections. A session without an original is refused and left
// unchanged: nothing reconstructs one from mutable data.
func RestoreOriginalPlan(b *Rebuilder, sid string) Plan {
	return Plan{
		what: "restore-original", made: state.MadeCrash, sid: sid, busy: true,
		read: func(ctx context.Context) (Snapshot, error) {
			if err := b.rec.Do(ctx, func(ctx context.Context) { b.rec.FixOriginal(ctx, sid) }); err != nil {
				return Snapshot{}, fmt.Errorf("restore-original %s: %w", sid, err)
			}
			snap, err := SnapshotIn(ctx, b.rec, sid)
			if err == nil && snap.Orig == nil {
				err = wire.Refuse(proxy.CodeInvalidParams, "session %s has no recorded original config (it was recorded before originals existed, or imported); nothing was changed", sid)
			}
			return snap, err
		},
		native: func(ctx context.Context, a *Attempt) error {
			a.native, a.Catalog = a.Snap.Native, a.Snap.Live
			if !b.led.IsStale(sid) {
				return nil
			}
			// The agent died under an earlier attempt: the session needs a
			// native session again before the original goes onto it.
			return b.climb(true, false)(ctx, a)
		},
		target: func(a *Attempt) *state.Config { return a.Snap.Orig },
		after: func(s *record.Session, a *Attempt) {
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
		},
	}
}

// RecoverPlan is the crash ladder: a session whose native session died
// with the agent is rebuilt by session/resume if the agent offers it, then
// session/load (its replay kept from the client, which has the history),
// then session/new with the kept turns handed over. Whichever rung holds,
// the config is restored after: a native load does not keep it.
func RecoverPlan(b *Rebuilder, sid string) Plan {
	return Plan{
		what: "recovery", made: state.MadeCrash, sid: sid, busy: true, owes: true,
		skip:   func() bool { return !b.led.IsStale(sid) }, // another request rebuilt it meanwhile
		read:   func(ctx context.Context) (Snapshot, error) { return SnapshotIn(ctx, b.rec, sid) },
		native: b.climb(true, false),
		target: b.owed,
		after: func(s *record.Session, a *Attempt) {
			// A native session the agent brought back still lacks a
			// handoff that never reached its predecessor.
			if a.path == "new" || s.Rec.HandoffPending {
				b.Arm(s)
			}
		},
		done: func(_ context.Context, a *Attempt) {
			b.log.Info("session rebuilt after the agent's exit", "session", sid, "path", a.path)
		},
	}
}

// ReopenPlan brings back, for a client's load or resume, a session whose
// native session is not live here, by the ladder. A native load the client
// asked for sends the agent's replay to the client, under its own id; a
// resume sends none, and after a resume or a new session the sidecar sends
// the recorded history itself when the client asked for it (history: a
// load, or a v2 resume with replayFrom, wire.WantsHistory).
func ReopenPlan(b *Rebuilder, sid, method string, history bool, got *Attempt) Plan {
	var lines [][]byte
	return Plan{
		what: "reopen", made: state.MadeReopen, sid: sid, busy: true, owes: true,
		read:   func(ctx context.Context) (Snapshot, error) { return SnapshotIn(ctx, b.rec, sid) },
		native: b.climb(false, history),
		target: b.owed,
		after: func(s *record.Session, a *Attempt) {
			s.Reopened()
			if a.path == "new" {
				b.Arm(s)
			}
			if !a.replayed {
				var turns []state.Turn
				if history {
					turns = replay.Visible(&s.Rec, b.rec.FullTurns(b.ctx, s))
				}
				lines = HistoryUpdates(b.version(), sid, turns)
			}
		},
		done: func(_ context.Context, a *Attempt) {
			*got = *a
			for _, line := range lines {
				SendOwn(b.sc, b.log, proxy.AgentToClient, line)
			}
			b.log.Info("session reopened", "session", sid, "method", method, "path", a.path)
		},
	}
}

// absorbPlan answers from the record a client's load or resume of a live
// session that the agent failed (open.go): a fresh native session with the
// session's config and its kept turns armed, the recorded history for a
// load, and the held response let go as a success, under the client's id.
func absorbPlan(b *Rebuilder, snap Snapshot, method string, id []byte, ev record.Event) Plan {
	var history [][]byte
	sid := snap.Client
	return Plan{
		what: "reopen after the agent's failed " + method, made: state.MadeAbsorbed, sid: sid, busy: true, shared: true, owes: true, async: true,
		read:   func(context.Context) (Snapshot, error) { return snap, nil },
		native: b.fresh("reopen"),
		target: b.owed,
		after: func(s *record.Session, a *Attempt) {
			s.Reopened()
			b.Arm(s)
			var turns []state.Turn
			if wire.WantsHistory(b.version(), method, ev.Req.Params) {
				turns = replay.Visible(&s.Rec, b.rec.FullTurns(b.ctx, s))
			}
			history = HistoryUpdates(b.version(), sid, turns)
		},
		done: func(_ context.Context, a *Attempt) {
			lines := append(history, wire.Response(id, b.ReopenResult(a)))
			ev.Release(append(lines, b.cfg.Commands(a.native, sid)...)...)
			b.log.Info("session reopened from the record", "session", sid, "method", method, "native", a.native)
		},
		failed: func(err error) {
			b.log.Error("the record could not answer the "+method+" the agent failed; the agent's error goes to the client", "session", sid, "err", err)
			ev.Release(ev.Raw)
		},
	}
}

// ForkPlan starts the client session child from a parent's conversation,
// as snap captured it, with the parent's config restored and the lineage
// recorded. A fork of the whole conversation on an agent that forks is the
// agent's own session/fork, which keeps the real history, tool results
// and all, where a handoff would carry a summary; any other is a fresh
// native session, handed the inherited turns with its first prompt.
func ForkPlan(b *Rebuilder, parent, child string, at int, whole bool, snap Snapshot) Plan {
	agentForks := false
	return Plan{
		what: "fork", made: state.MadeFork, sid: child,
		read: func(context.Context) (Snapshot, error) { return snap, nil },
		native: func(ctx context.Context, a *Attempt) error {
			// The agent cannot fork a native session that died with it.
			agentForks = whole && b.life.Caps().Fork && snap.Native != "" && !b.led.IsStale(parent)
			var err error
			if agentForks {
				a.native, a.Catalog, err = b.eng.forkNative(ctx, child, snap.Native, snap)
				a.path = "fork"
			} else {
				a.native, a.Catalog, err = b.eng.newNative(ctx, child, snap)
				a.path = "new"
			}
			if err != nil {
				return fmt.Errorf("fork %s: %w", parent, err)
			}
			err = b.rec.Do(ctx, func(ctx context.Context) {
				now := b.cfg.Now()
				s := &record.Session{Started: true}
				s.Rec = state.Session{
					ClientID: child, NativeID: a.native, NativeHistory: []string{a.native}, Agent: b.cfg.Agent, AgentName: b.cfg.Name,
					Cwd: snap.Cwd, McpServers: snap.Mcp, AdditionalDirectories: snap.Dirs, Meta: snap.Meta, NewParams: snap.Params, Created: now,
					Baseline: record.CloneConfig(a.Catalog), Live: a.Catalog, Original: record.CloneConfig(snap.Live),
					Lineage: &state.Lineage{ParentID: parent, ForkTurn: at},
				}
				s.Born = now
				b.rec.SetSession(child, s)
				b.rec.PutSession(ctx, s)
			})
			if err != nil {
				return fmt.Errorf("fork %s: record the child: %w", parent, err)
			}
			return nil
		},
		target: func(*Attempt) *state.Config { return snap.Live },
		after: func(s *record.Session, _ *Attempt) {
			if !agentForks {
				b.Arm(s) // the fresh session lacks the conversation: hand it over
			}
		},
	}
}

// AdoptPlan takes over a session another agent ran, from its record: a
// fresh native session with the same cwd, MCP servers and directories;
// this agent's start-up settings; the mode carried over when this agent
// offers the same mode id (models and other options stay with their
// agent); and a handoff of every kept turn, whichever agent ran it, armed
// for the next prompt. What did not carry is reported, not blocking: the
// user chose the move, and the agent's own values are a sound place to
// start. The target may die under the move: it starts again on the
// restarted target, from the same record.
func AdoptPlan(b *Rebuilder, sid string, rep *SwitchReport) Plan {
	var old *state.Session
	var setErrs []state.SetError
	return Plan{
		what: "switch", made: state.MadeSwitch, sid: sid, busy: true,
		read: func(ctx context.Context) (Snapshot, error) {
			var err error
			if old, err = b.cfg.Store.Session(ctx, sid); err != nil {
				return Snapshot{}, fmt.Errorf("adopt %s: read the record: %w", sid, err)
			}
			turns, err := b.cfg.Store.Turns(ctx, sid)
			if err != nil {
				return Snapshot{}, fmt.Errorf("adopt %s: read the turns: %w", sid, err)
			}
			err = b.rec.Do(ctx, func(context.Context) {
				s := &record.Session{Rec: *old, Turns: turns, Started: true}
				for i := range s.Turns {
					record.Lighten(&s.Turns[i])
				}
				record.ThinOut(s)
				b.rec.SetSession(sid, s)
			})
			if err != nil {
				return Snapshot{}, fmt.Errorf("adopt %s: %w", sid, err)
			}
			// What another agent made of the session (its native session,
			// its config) stays with it; the client's inputs come along.
			snap := SnapshotOfRecord(old)
			snap.Native, snap.Live, snap.Orig = "", nil, nil
			return snap, nil
		},
		native: b.fresh("adopt"),
		target: func(a *Attempt) *state.Config {
			var target *state.Config
			target, setErrs = settingsTarget(a.Catalog, b.cfg.Settings)
			*rep = SwitchReport{SessionID: sid, Agent: b.cfg.Name, NativeSessionID: a.native}
			rep.Carried, rep.NotCarried = carry(old.Live, target, b.cfg.Name)
			return target
		},
		settle: func(ctx context.Context, a *Attempt) Report {
			// A value this agent did not take is a note, not a block (see above).
			for _, f := range a.Out.failed {
				rep.NotCarried = append(rep.NotCarried, fmt.Sprintf("%s=%s: %s", f.Field, wire.Unquote(f.Want), f.Reason))
			}
			for _, e := range setErrs {
				rep.NotCarried = append(rep.NotCarried, fmt.Sprintf("%s=%s (start-up setting): %s", e.OptionID, e.Value, e.Err))
			}
			out := a.Out
			out.failed = nil
			res := b.settle(ctx, sid, b.made(state.MadeSwitch, a), out, func(s *record.Session) {
				s.Rec.AgentName, s.Rec.Agent = b.cfg.Name, b.cfg.Agent
				s.Rec.Baseline = record.CloneConfig(a.Catalog)
				s.Rec.SetErrors = append(s.Rec.SetErrors, setErrs...)
				b.Arm(s)
				rep.KeptTurns = 0
				for _, t := range replay.Kept(b.conversation(s)) {
					if !replay.IsSummary(&t) {
						rep.KeptTurns++ // a compaction's summary stands for turns, and is not one
					}
				}
			})
			rep.Config = res.Config
			return res
		},
		done: func(_ context.Context, a *Attempt) {
			rep.Options = a.Out.OptionsRaw
			if rep.Options == nil {
				rep.Options = OptionsOf(a.Out.Catalog)
			}
			b.log.Info("session moved to this agent", "session", sid, "agent", b.cfg.Name, "native", a.native)
		},
	}
}

// keep gets an attempt the native session it has now, on catalog: a copy
// of the config the record holds for it, taken on the record's goroutine.
func keep(native string, catalog *state.Config) func(ctx context.Context, a *Attempt) error {
	return func(_ context.Context, a *Attempt) error {
		a.native, a.Catalog = native, catalog
		return nil
	}
}

// openRestorePlan puts the config a session had before the agent's own
// load or resume (or a fork's parent had) back on it, and then lets the
// held response go with the restored config in it. The agent's reports of
// the restore's calls would reach the client after the held response,
// which carries the settled config, and name interim values (the
// config_option_update that follows a model change names the effort and
// mode before their calls): they are kept from the client, and the
// response is followed by the restore's own report of where it settled.
func openRestorePlan(b *Rebuilder, s *record.Session, ev record.Event, result json.RawMessage, before *state.Config) Plan {
	native, client := s.Rec.NativeID, s.Rec.ClientID
	return Plan{
		what: "restore after " + ev.Req.Method, sid: client, busy: true, shared: true, once: true, hushConfig: true, async: true,
		native: keep(native, record.CloneConfig(s.Rec.Live)),
		target: func(*Attempt) *state.Config { return before },
		settle: func(ctx context.Context, a *Attempt) Report {
			out := a.Out
			b.rec.Settle(ev, func(ctx context.Context) {
				var blocked *state.Blocked
				switch {
				case out.lost:
					// The agent died under the restore: the rebuild that
					// follows aims at the whole target, not at what landed.
					b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(client, before) })
				case len(out.failed) > 0:
					blocked = blockedBy(out, b.cfg.Now())
					b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(client, before) })
				default:
					b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(client, nil) })
				}
				b.led.Update(func(f *ledger.Flight) { f.Sessions.SetBlocked(client, blocked) })
				s.Rec.Live, s.Rec.Blocked = out.Catalog, blocked
				b.rec.PutSession(ctx, s)
				b.rec.Flush(ctx)
				res := result
				if out.OptionsRaw != nil {
					if next, err := wire.SetPath(res, out.OptionsRaw, "configOptions"); err == nil {
						res = next
					}
				}
				lines := [][]byte{withResult(ev.Raw, b.WithPickers(res, before, out.Catalog))}
				lines = append(lines, b.cfg.Commands(native, client)...)
				ev.Release(append(lines, b.notifications(out, client)...)...)
			})
			return Report{}
		},
	}
}

// settingsPlan applies the start-up settings (--set) to a new session
// while its session/new response is held, so the client's first sight of
// the session is followed at once by the settled config, and the original
// is taken only after it. A setting the agent does not take is recorded
// and logged, not blocking: the session runs on the agent's value.
func settingsPlan(b *Rebuilder, s *record.Session, ev record.Event) Plan {
	native, client := s.Rec.NativeID, s.Rec.ClientID
	target, setErrs := settingsTarget(s.Rec.Live, b.cfg.Settings)
	return Plan{
		what: "start-up settings", sid: client, once: true, hushConfig: true, async: true,
		native: keep(native, record.CloneConfig(s.Rec.Live)),
		target: func(*Attempt) *state.Config { return target },
		settle: func(ctx context.Context, a *Attempt) Report {
			out := a.Out
			b.rec.Settle(ev, func(ctx context.Context) {
				s.Rec.Live = out.Catalog
				for _, f := range out.failed {
					s.Rec.SetErrors = append(s.Rec.SetErrors, state.SetError{OptionID: f.Field, Value: wire.Unquote(f.Want), Err: f.Reason})
				}
				s.Rec.SetErrors = append(s.Rec.SetErrors, setErrs...)
				for _, e := range s.Rec.SetErrors {
					b.log.Error("start-up setting not applied; the session runs on the agent's value", "session", client, "option", e.OptionID, "value", e.Value, "reason", e.Err)
				}
				s.Shown = true
				b.rec.PutSession(ctx, s)
				b.rec.Flush(ctx)
				lines := append([][]byte{bridged(b, ev.Raw)}, b.cfg.Commands(native, client)...)
				ev.Release(append(lines, b.notifications(out, client)...)...)
			})
			return Report{}
		},
	}
}
