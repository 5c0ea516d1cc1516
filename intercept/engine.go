package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// engine builds native sessions on the agent and puts a config on them.
// It climbs resume, then load, then new; it creates sessions while the id
// mapping holds their early frames; it restores a config model first, then
// mode, then the other options in id order; and it runs an attempt again,
// from the same capture, when the agent dies under it (rebuilding).
//
// It knows the agent, the agent's life and the session table, never the
// record: the Recorder hands it a snapshot of a session, and settles what
// it built. Every rebuild (reset, rollback, restore-original, the crash
// ladder, a reopen, a fork, a switch) is a Recorder method of that shape.
type engine struct {
	sc          Sidecar // bound with the Recorder (Bind)
	led         *ledger.Ledger
	life        *life.Life
	watch       *watch
	log         *slog.Logger
	callTimeout time.Duration
}

// rebuilding runs a rebuild of sid until it completes on an agent that
// stayed up through it. When the agent dies under an attempt (try reports
// lost: a call failed with ErrAgentGone, or the agent's life changed
// meanwhile), nothing of that attempt is settled: the session owes its
// capture, so whatever rebuilds it next aims there and not at a partial
// config, and once a restarted agent is up the attempt runs again
// (DESIGN.md "While the agent's side is being rebuilt, the client waits").
// The caller holds the session busy throughout, so requests for it wait.
func (e *engine) rebuilding(ctx context.Context, sid string, capture *state.Config, try func(ctx context.Context, gen uint64) (lost bool, err error)) error {
	for {
		// An attempt starts on an agent that is up: one begun while the
		// agent restarts would count the life it then fails in as its
		// own, and wait for yet another death before it tried again.
		// The life is read before the phase; AgentGone sets the phase
		// before it counts the life, so an attempt never pairs the dead
		// agent's phase with the next life's count.
		gen := e.life.Gen()
		if e.life.Phase() != life.Up {
			if err := e.watch.awaitUp(ctx, func() bool { return true }); err != nil {
				return fmt.Errorf("rebuild %s: %w", sid, err)
			}
			continue
		}
		lost, err := try(ctx, gen)
		if !lost {
			// Settled, or failed for a reason of its own. An agent that
			// dies after a settle finds the session's full capture in
			// live, and its recovery aims there.
			return err
		}
		if capture != nil {
			e.led.Update(func(f *ledger.Flight) { f.Owe(sid, capture) })
		}
		e.log.Info("the agent exited during a rebuild; it runs again from its capture once the agent is back", "session", sid)
		if err := e.watch.awaitAgent(ctx, gen); err != nil {
			return fmt.Errorf("rebuild %s: %w", sid, err)
		}
	}
}

// settled ends a rebuild attempt of generation gen that landed: the session
// is no longer stale, unless the agent died meanwhile. AgentGone counts the
// new life before it marks sessions stale, so the check under the table's
// lock never clears a mark a later death set (the native session the
// attempt made died with that agent).
func (e *engine) settled(sid string, gen uint64) {
	e.led.Update(func(f *ledger.Flight) { f.Settled(sid, gen) })
}

// lostSince says whether the agent died under a rebuild attempt that began
// in generation gen.
func (e *engine) lostSince(gen uint64, out outcome) bool {
	return out.lost || e.life.Gen() != gen
}

// newNative creates a fresh native session like the client's (the same cwd,
// MCP servers and additional directories) and puts it behind the client's id.
func (e *engine) newNative(ctx context.Context, sid string, snap snapshot) (string, *state.Config, error) {
	return e.create(ctx, sid, wire.SessionNew, sessionParams(snap))
}

// forkNative asks the agent to fork the native session parent, with its
// whole history, for the client session sid.
func (e *engine) forkNative(ctx context.Context, sid, parent string, snap snapshot) (string, *state.Config, error) {
	params := sessionParams(snap)
	params["sessionId"] = parent
	return e.create(ctx, sid, wire.SessionFork, params)
}

// sessionParams are what a native session is created with: the session's
// cwd, MCP servers and additional directories, as the client gave them.
func sessionParams(snap snapshot) map[string]any {
	params := map[string]any{"cwd": snap.cwd, "mcpServers": mcpOrEmpty(snap.mcp)}
	if len(snap.dirs) > 0 {
		params["additionalDirectories"] = snap.dirs
	}
	return params
}

// create makes a native session for the client session sid with method
// (session/new or session/fork) and maps sid to it. Agent frames for the
// new session that come before the answer are held meanwhile (ids.go).
func (e *engine) create(ctx context.Context, sid, method string, params map[string]any) (string, *state.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	gen := e.life.Gen()
	e.led.Update(func(f *ledger.Flight) { f.BeginCreating() })
	defer e.led.Update(func(f *ledger.Flight) { f.EndCreating() })
	var res json.RawMessage
	if err := e.sc.Call(ctx, method, params, &res); err != nil {
		return "", nil, err
	}
	var ids struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(res, &ids) != nil || ids.SessionID == "" {
		return "", nil, errors.New(method + " answered without a sessionId")
	}
	e.led.Update(func(f *ledger.Flight) { f.Remap(sid, ids.SessionID, gen) }) // the held early frames go out under sid (endCreating)
	return ids.SessionID, wire.ConfigFromResult(res), nil
}

// climb runs the recovery ladder and returns the native session it ended
// on, its config, and which rung held: "resume", "load" or "new". With
// quiet, a native load's replay is kept from the client.
func (e *engine) climb(ctx context.Context, sid string, snap snapshot, quiet bool) (string, *state.Config, string, error) {
	caps := e.life.Caps()
	params := map[string]any{"sessionId": snap.native, "cwd": snap.cwd, "mcpServers": mcpOrEmpty(snap.mcp)}
	e.led.Update(func(f *ledger.Flight) { f.Opening(snap.native) })
	if caps.Resume && snap.native != "" {
		// What the agent says while it resumes is about a resume the
		// client did not ask for ("recorded with model X but is resuming
		// with Y", codex-acp 2.6.0), and the restore that follows makes it
		// untrue: its messages are kept from the client.
		done := hush(e.led, snap.native, ledger.HushMessages)
		res, err := e.callRaw(ctx, wire.SessionResume, params)
		done()
		if err == nil {
			return snap.native, carryLegacy(wire.ConfigFromResult(res), snap.live), "resume", nil
		} else {
			e.log.Info("session/resume failed; trying the next rung", "session", sid, "err", err)
		}
	}
	if caps.Load && snap.native != "" {
		done := func() {}
		if quiet {
			done = hush(e.led, snap.native, ledger.HushAll) // the client has the history
		}
		res, err := e.callRaw(ctx, wire.SessionLoad, params)
		done()
		if err == nil {
			return snap.native, carryLegacy(wire.ConfigFromResult(res), snap.live), "load", nil
		}
		e.log.Info("session/load failed; creating a new session", "session", sid, "err", err)
	}
	native, catalog, err := e.newNative(ctx, sid, snap)
	if err != nil {
		return "", nil, "", fmt.Errorf("rebuild %s: %w", sid, err)
	}
	return native, catalog, "new", nil
}

func (e *engine) callRaw(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	var res json.RawMessage
	err := e.sc.Call(ctx, method, params, &res)
	return res, err
}

func mcpOrEmpty(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || wire.IsNull(m) {
		return json.RawMessage("[]")
	}
	return m
}
