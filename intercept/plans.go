package intercept

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
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

// fresh gets an attempt a new native session like the client's.
func (r *Recorder) fresh(what string) func(ctx context.Context, a *attempt) error {
	return func(ctx context.Context, a *attempt) error {
		native, catalog, err := r.eng.newNative(ctx, a.snap.client, a.snap)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, a.snap.client, err)
		}
		a.native, a.catalog, a.path = native, catalog, "new"
		return nil
	}
}

// climb gets an attempt a native session by the ladder: resume, load,
// new. With quiet, a native load's replay is kept from the client.
func (r *Recorder) climb(quiet bool) func(ctx context.Context, a *attempt) error {
	return func(ctx context.Context, a *attempt) (err error) {
		a.native, a.catalog, a.path, err = r.eng.climb(ctx, a.snap.client, a.snap, quiet)
		return err
	}
}

// owed is what a rebuild restores: the config a failed restore still owes,
// else live.
func (r *Recorder) owed(a *attempt) *state.Config { return r.led.TargetOr(a.snap.client, a.snap.live) }

// resetPlan gives a session a fresh native session with the same config:
// the conversation is cleared on purpose, the client's id stays.
func (r *Recorder) resetPlan(sid string) Plan {
	return Plan{
		what: "reset", sid: sid, busy: true, owes: true,
		read: func(ctx context.Context) (snapshot, error) {
			snap, err := r.snapshot(ctx, sid)
			if err == nil && snap.running {
				err = refuse(proxy.CodeBusy, "a turn is running; cancel it or wait for it to end, then reset")
			}
			return snap, err
		},
		native: r.fresh("reset"),
		target: r.owed,
		after: func(s *session, _ *attempt) {
			s.rec.ContextFrom = len(s.turns) + 1
			s.rec.Handoff = nil
		},
	}
}

// rollbackPlan keeps turns 1..keep of the current conversation and takes
// the rest back: they are marked rolled_back, never deleted, and a fresh
// native session gets the kept turns with the next prompt. A rollback
// never uses session/load or resume: the agent's own history holds the
// turns taken back. rep gets the kept count and the turns taken back.
func (r *Recorder) rollbackPlan(sid string, keep int, rep *RollbackReport) Plan {
	return Plan{
		what: "rollback", sid: sid, busy: true, owes: true,
		read: func(ctx context.Context) (snapshot, error) {
			var snap snapshot
			var fail error
			err := r.do(ctx, func(ctx context.Context) {
				s := r.sessions[sid]
				switch {
				case s == nil:
					fail = refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid)
					return
				case s.turn != nil:
					fail = refuse(proxy.CodeBusy, "a turn is running; a rollback waits until it ends or is cancelled")
					return
				}
				vis := visible(s)
				if keep < 0 || keep > len(vis) {
					fail = refuse(proxy.CodeInvalidParams, "keepTurns %d is out of range: the conversation has %d turns", keep, len(vis))
					return
				}
				snap = snapshotOf(s)
				rep.Kept = keep
				for _, t := range vis[keep:] {
					rep.RolledBack = append(rep.RolledBack, firstLine(t.PromptText))
				}
			})
			if err != nil {
				return snap, fmt.Errorf("rollback %s: %w", sid, err)
			}
			return snap, fail
		},
		native: r.fresh("rollback"),
		target: r.owed,
		after: func(s *session, _ *attempt) {
			vis := visible(s)
			after := s.rec.ContextFrom - 1 // the last turn kept, by index
			if keep > 0 {
				after = vis[keep-1].Index
			}
			for _, t := range vis[keep:] {
				t.Status = state.TurnRolledBack
			}
			// The store marks them (memory may hold them without their text).
			if err := r.cfg.Store.RollBack(r.ctx, sid, max(after, 0)); err != nil {
				r.log.Warn("record rollback", "session", sid, "err", err)
			}
			r.arm(s)
		},
	}
}

// restoreOriginalPlan applies the session's immutable original to its
// current native session, and records those values as the client's
// explicit selections. A session without an original is refused and left
// unchanged: nothing reconstructs one from mutable data.
func (r *Recorder) restoreOriginalPlan(sid string) Plan {
	return Plan{
		what: "restore-original", sid: sid, busy: true,
		read: func(ctx context.Context) (snapshot, error) {
			if err := r.do(ctx, func(ctx context.Context) { r.fixOriginal(ctx, sid) }); err != nil {
				return snapshot{}, fmt.Errorf("restore-original %s: %w", sid, err)
			}
			snap, err := r.snapshot(ctx, sid)
			if err == nil && snap.orig == nil {
				err = refuse(proxy.CodeInvalidParams, "session %s has no recorded original config (it was recorded before originals existed, or imported); nothing was changed", sid)
			}
			return snap, err
		},
		native: func(ctx context.Context, a *attempt) error {
			a.native, a.catalog = a.snap.native, a.snap.live
			if !r.led.IsStale(sid) {
				return nil
			}
			// The agent died under an earlier attempt: the session needs a
			// native session again before the original goes onto it.
			return r.climb(true)(ctx, a)
		},
		target: func(a *attempt) *state.Config { return a.snap.orig },
		after: func(s *session, a *attempt) {
			if a.path == "new" {
				r.arm(s)
			}
			if len(a.out.failed) > 0 {
				return
			}
			orig, now := a.snap.orig, r.cfg.Now()
			for _, o := range orig.Options {
				s.rec.Overrides = append(s.rec.Overrides, state.Override{OptionID: o.ID, Category: o.Category, Value: o.Current, At: now})
			}
			for _, l := range []struct {
				field string
				leg   *state.Legacy
			}{{"model", orig.Model}, {"mode", orig.Mode}} {
				if l.leg != nil && orig.ByCategory(l.field) == nil {
					s.rec.Overrides = append(s.rec.Overrides, state.Override{OptionID: l.field, Category: l.field, Value: wire.String(l.leg.Current), At: now})
				}
			}
		},
	}
}

// recoverPlan is the crash ladder: a session whose native session died
// with the agent is rebuilt by session/resume if the agent offers it, then
// session/load (its replay kept from the client, which has the history),
// then session/new with the kept turns handed over. Whichever rung holds,
// the config is restored after: a native load does not keep it.
func (r *Recorder) recoverPlan(sid string) Plan {
	return Plan{
		what: "recovery", sid: sid, busy: true, owes: true,
		skip:   func() bool { return !r.led.IsStale(sid) }, // another request rebuilt it meanwhile
		read:   func(ctx context.Context) (snapshot, error) { return r.snapshot(ctx, sid) },
		native: r.climb(true),
		target: r.owed,
		after: func(s *session, a *attempt) {
			// A native session the agent brought back still lacks a
			// handoff that never reached its predecessor.
			if a.path == "new" || s.rec.HandoffPending {
				r.arm(s)
			}
		},
		done: func(_ context.Context, a *attempt) {
			r.log.Info("session rebuilt after the agent's exit", "session", sid, "path", a.path)
		},
	}
}

// reopenPlan brings back, for a client's load or resume, a session whose
// native session is not live here, by the ladder. A native load the client
// asked for sends the agent's replay to the client, under its own id; a
// resume sends none, and after a resume or a new session the sidecar sends
// the recorded history for a load itself.
func (r *Recorder) reopenPlan(sid, method string, got *attempt) Plan {
	var history [][]byte
	return Plan{
		what: "reopen", sid: sid, busy: true, owes: true,
		read:   func(ctx context.Context) (snapshot, error) { return r.snapshot(ctx, sid) },
		native: r.climb(false),
		target: r.owed,
		after: func(s *session, a *attempt) {
			reopened(&s.rec)
			if a.path == "new" {
				r.arm(s)
			}
			if method == wire.SessionLoad && a.path != "load" {
				history = historyUpdates(sid, replay.Visible(&s.rec, r.fullTurns(r.ctx, s)))
			}
		},
		done: func(_ context.Context, a *attempt) {
			*got = *a
			for _, line := range history {
				r.send(proxy.AgentToClient, line)
			}
			r.log.Info("session reopened", "session", sid, "method", method, "path", a.path)
		},
	}
}

// forkPlan starts the client session child from a parent's conversation,
// as snap captured it, with the parent's config restored and the lineage
// recorded. A fork of the whole conversation on an agent that forks is the
// agent's own session/fork, which keeps the real history, tool results
// and all, where a handoff would carry a summary; any other is a fresh
// native session, handed the inherited turns with its first prompt.
func (r *Recorder) forkPlan(parent, child string, at int, whole bool, snap snapshot) Plan {
	agentForks := false
	return Plan{
		what: "fork", sid: child,
		read: func(context.Context) (snapshot, error) { return snap, nil },
		native: func(ctx context.Context, a *attempt) error {
			// The agent cannot fork a native session that died with it.
			agentForks = whole && r.life.Caps().Fork && snap.native != "" && !r.led.IsStale(parent)
			var err error
			if agentForks {
				a.native, a.catalog, err = r.eng.forkNative(ctx, child, snap.native, snap)
			} else {
				a.native, a.catalog, err = r.eng.newNative(ctx, child, snap)
			}
			if err != nil {
				return fmt.Errorf("fork %s: %w", parent, err)
			}
			err = r.do(ctx, func(ctx context.Context) {
				now := r.cfg.Now()
				s := &session{started: true}
				s.rec = state.Session{
					ClientID: child, NativeID: a.native, NativeHistory: []string{a.native}, Agent: r.cfg.Agent, AgentName: r.cfg.Name,
					Cwd: snap.cwd, McpServers: snap.mcp, AdditionalDirectories: snap.dirs, Created: now,
					Baseline: cloneConfig(a.catalog), Live: a.catalog, Original: cloneConfig(snap.live),
					Lineage: &state.Lineage{ParentID: parent, ForkTurn: at},
				}
				r.sessions[child] = s
				r.putSession(ctx, s)
			})
			if err != nil {
				return fmt.Errorf("fork %s: record the child: %w", parent, err)
			}
			return nil
		},
		target: func(*attempt) *state.Config { return snap.live },
		after: func(s *session, _ *attempt) {
			if !agentForks {
				r.arm(s) // the fresh session lacks the conversation: hand it over
			}
		},
	}
}

// adoptPlan takes over a session another agent ran, from its record: a
// fresh native session with the same cwd, MCP servers and directories;
// this agent's start-up settings; the mode carried over when this agent
// offers the same mode id (models and other options stay with their
// agent); and a handoff of every kept turn, whichever agent ran it, armed
// for the next prompt. What did not carry is reported, not blocking: the
// user chose the move, and the agent's own values are a sound place to
// start. The target may die under the move: it starts again on the
// restarted target, from the same record.
func (r *Recorder) adoptPlan(sid string, rep *SwitchReport) Plan {
	var old *state.Session
	var setErrs []state.SetError
	return Plan{
		what: "switch", sid: sid, busy: true,
		read: func(ctx context.Context) (snapshot, error) {
			var err error
			if old, err = r.cfg.Store.Session(ctx, sid); err != nil {
				return snapshot{}, fmt.Errorf("adopt %s: read the record: %w", sid, err)
			}
			turns, err := r.cfg.Store.Turns(ctx, sid)
			if err != nil {
				return snapshot{}, fmt.Errorf("adopt %s: read the turns: %w", sid, err)
			}
			err = r.do(ctx, func(context.Context) {
				s := &session{rec: *old, turns: turns, started: true}
				for i := range s.turns {
					lighten(&s.turns[i])
				}
				thinOut(s)
				r.sessions[sid] = s
			})
			if err != nil {
				return snapshot{}, fmt.Errorf("adopt %s: %w", sid, err)
			}
			return snapshot{client: sid, cwd: old.Cwd, mcp: old.McpServers, dirs: old.AdditionalDirectories}, nil
		},
		native: r.fresh("adopt"),
		target: func(a *attempt) *state.Config {
			var target *state.Config
			target, setErrs = settingsTarget(a.catalog, r.cfg.Settings)
			*rep = SwitchReport{SessionID: sid, Agent: r.cfg.Name, NativeSessionID: a.native}
			rep.Carried, rep.NotCarried = carry(old.Live, target, r.cfg.Name)
			return target
		},
		settle: func(ctx context.Context, a *attempt) Report {
			// A value this agent did not take is a note, not a block (see above).
			for _, f := range a.out.failed {
				rep.NotCarried = append(rep.NotCarried, fmt.Sprintf("%s=%s: %s", f.Field, wire.Unquote(f.Want), f.Reason))
			}
			for _, e := range setErrs {
				rep.NotCarried = append(rep.NotCarried, fmt.Sprintf("%s=%s (start-up setting): %s", e.OptionID, e.Value, e.Err))
			}
			out := a.out
			out.failed = nil
			res := r.settle(ctx, sid, a.native, out, func(s *session) {
				s.rec.AgentName, s.rec.Agent = r.cfg.Name, r.cfg.Agent
				s.rec.Baseline = cloneConfig(a.catalog)
				s.rec.SetErrors = append(s.rec.SetErrors, setErrs...)
				r.arm(s)
				rep.KeptTurns = len(replay.Kept(r.conversation(s)))
			})
			rep.Config = res.Config
			return res
		},
		done: func(_ context.Context, a *attempt) {
			rep.Options = a.out.optionsRaw
			if rep.Options == nil {
				rep.Options = optionsOf(a.out.catalog)
			}
			r.log.Info("session moved to this agent", "session", sid, "agent", r.cfg.Name, "native", a.native)
		},
	}
}

// keep gets an attempt the native session it has now, on catalog: a copy
// of the config the record holds for it, taken on the record's goroutine.
func keep(native string, catalog *state.Config) func(ctx context.Context, a *attempt) error {
	return func(_ context.Context, a *attempt) error {
		a.native, a.catalog = native, catalog
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
func (r *Recorder) openRestorePlan(s *session, ev event, result json.RawMessage, before *state.Config) Plan {
	native, client := s.rec.NativeID, s.rec.ClientID
	return Plan{
		what: "restore after " + ev.req.method, sid: client, busy: true, shared: true, once: true, hushConfig: true, async: true,
		native: keep(native, cloneConfig(s.rec.Live)),
		target: func(*attempt) *state.Config { return before },
		settle: func(ctx context.Context, a *attempt) Report {
			out := a.out
			r.settleHeld(ev, func(ctx context.Context) {
				var blocked *state.Blocked
				switch {
				case out.lost:
					// The agent died under the restore: the rebuild that
					// follows aims at the whole target, not at what landed.
					r.led.Update(func(f *ledger.Flight) { f.Owe(client, before) })
				case len(out.failed) > 0:
					blocked = blockedBy(out, r.cfg.Now())
					r.led.Update(func(f *ledger.Flight) { f.Owe(client, before) })
				default:
					r.led.Update(func(f *ledger.Flight) { f.Owe(client, nil) })
				}
				r.led.Update(func(f *ledger.Flight) { f.SetBlocked(client, blocked) })
				s.rec.Live, s.rec.Blocked = out.catalog, blocked
				r.putSession(ctx, s)
				r.flush(ctx)
				res := result
				if out.optionsRaw != nil {
					if next, err := wire.SetPath(res, out.optionsRaw, "configOptions"); err == nil {
						res = next
					}
				}
				lines := [][]byte{withResult(ev.raw, withPickers(res, before, out.catalog))}
				lines = append(lines, ownCommands(r.led, native, client)...)
				ev.release(append(lines, out.notifications(client)...)...)
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
func (r *Recorder) settingsPlan(s *session, ev event) Plan {
	native, client := s.rec.NativeID, s.rec.ClientID
	target, setErrs := settingsTarget(s.rec.Live, r.cfg.Settings)
	return Plan{
		what: "start-up settings", sid: client, once: true, hushConfig: true, async: true,
		native: keep(native, cloneConfig(s.rec.Live)),
		target: func(*attempt) *state.Config { return target },
		settle: func(ctx context.Context, a *attempt) Report {
			out := a.out
			r.settleHeld(ev, func(ctx context.Context) {
				s.rec.Live = out.catalog
				for _, f := range out.failed {
					s.rec.SetErrors = append(s.rec.SetErrors, state.SetError{OptionID: f.Field, Value: wire.Unquote(f.Want), Err: f.Reason})
				}
				s.rec.SetErrors = append(s.rec.SetErrors, setErrs...)
				for _, e := range s.rec.SetErrors {
					r.log.Error("start-up setting not applied; the session runs on the agent's value", "session", client, "option", e.OptionID, "value", e.Value, "reason", e.Err)
				}
				r.putSession(ctx, s)
				r.flush(ctx)
				lines := append([][]byte{ev.raw}, ownCommands(r.led, native, client)...)
				ev.release(append(lines, out.notifications(client)...)...)
			})
			return Report{}
		},
	}
}

// settleHeld runs fn on the recorder's goroutine for the held response of
// ev, and waits for it. Whatever befalls fn, the response goes: as fn
// lets it, or as it came when fn fails on it or the recorder has stopped
// (apply, enqueue).
func (r *Recorder) settleHeld(ev event, fn func(ctx context.Context)) {
	done := make(chan struct{})
	r.enqueue(event{fn: func(ctx context.Context) {
		defer close(done)
		fn(ctx)
	}, release: ev.release, raw: ev.raw})
	select {
	case <-done:
	case <-r.done:
	}
}
