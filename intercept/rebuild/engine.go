package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// engine builds native sessions on the agent and puts a config on them.
// It climbs resume, then load, then new; it creates sessions while the id
// mapping holds their early frames; and it restores a config model first,
// then mode, then the other options in id order.
//
// It knows the agent, the agent's life and the ledger, never the record:
// Run (rebuild.go) hands it a Snapshot of a session, and settles what it
// built.
type engine struct {
	sc          Sidecar // bound with the Recorder (Bind)
	led         *ledger.Ledger
	life        *life.Life
	watch       *Watch
	log         *slog.Logger
	callTimeout time.Duration
	now         func() time.Time
}

// newNative creates a fresh native session like the client's (the same cwd,
// MCP servers and additional directories) and puts it behind the client's id.
func (e *engine) newNative(ctx context.Context, sid string, snap Snapshot) (string, *state.Config, error) {
	return e.create(ctx, sid, wire.SessionNew, sessionParams(snap))
}

// forkNative asks the agent to fork the native session parent, with its
// whole history, for the client session sid.
func (e *engine) forkNative(ctx context.Context, sid, parent string, snap Snapshot) (string, *state.Config, error) {
	params := sessionParams(snap)
	params["sessionId"] = parent
	return e.create(ctx, sid, wire.SessionFork, params)
}

// forkNativeAt asks the agent to fork the native session parent at its
// message messageID (life.Habits.ForksAtMessage), for the client session
// sid: the fork keeps the history up to that message.
func (e *engine) forkNativeAt(ctx context.Context, sid, parent string, snap Snapshot, messageID string) (string, *state.Config, error) {
	params := sessionParams(snap)
	params["sessionId"] = parent
	params["_meta"] = wire.WithForkAt(snap.Meta, messageID)
	return e.create(ctx, sid, wire.SessionFork, params)
}

// sessionParams are what a native session is made or brought back with:
// the session's cwd, MCP servers, additional directories, _meta and other
// creation params, as the client gave them (DESIGN.md "Rebuilding a native
// session" 2). The _meta and ACP's systemPrompt carry creation options
// (a system prompt to append, for one) that a native session made without
// them would run without.
func sessionParams(snap Snapshot) map[string]any {
	params := map[string]any{}
	// The other members the client made the session with (ACP's
	// systemPrompt) go as they came; the ones the sidecar sets win.
	wire.EachMember(snap.Params, func(key string, value json.RawMessage) { params[key] = value })
	params["cwd"], params["mcpServers"] = snap.Cwd, mcpOrEmpty(snap.Mcp)
	if len(snap.Dirs) > 0 {
		params["additionalDirectories"] = snap.Dirs
	}
	if len(snap.Meta) > 0 && !wire.IsNull(snap.Meta) {
		params["_meta"] = snap.Meta
	}
	return params
}

// openParams are what a rung asks the agent to bring snap's native session
// back with: sessionParams, and the native session's id.
func openParams(snap Snapshot) map[string]any {
	params := sessionParams(snap)
	params["sessionId"] = snap.Native
	return params
}

// create makes a native session for the client session sid with method
// (session/new or session/fork) and maps sid to it. Agent frames for the
// new session that come before the answer are held meanwhile (ids.go).
// The native session's turn-like updates are kept from the client from
// the answer on (ledger.HushRebuild), until the caller lets them go
// (unhushNew).
func (e *engine) create(ctx context.Context, sid, method string, params map[string]any) (string, *state.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	gen := e.life.Gen()
	e.led.Update(func(f *ledger.Flight) { f.Natives.BeginCreating() })
	defer e.led.Update(func(f *ledger.Flight) { f.Natives.EndCreating() })
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
	e.led.Update(func(f *ledger.Flight) {
		f.Remap(sid, ids.SessionID, gen) // the held early frames go out under sid (endCreating)
		// What the agent says of the fresh session before and after its
		// answer (a state_update, usage) is not news of the client's turn;
		// the attempt lets it through again once settled (Rebuilder.attempt).
		f.Natives.Hush(ids.SessionID, ledger.HushRebuild)
	})
	e.agentCommands(ids.SessionID, res)
	return ids.SessionID, wire.ConfigFromResult(res), nil
}

// climbed is where a climb ended: the native session, its config, which
// rung held ("resume", "load" or "new"), and whether the agent replayed the
// conversation to the client (a load, or v2's resume with replayFrom).
type climbed struct {
	native   string
	cfg      *state.Config
	path     string
	replayed bool
}

// climb runs the recovery ladder and says where it ended (climbed). With
// quiet, a native load's replay is kept from the client (the client has
// the history). With replay, the client asked for the conversation (its
// own load, or v2's resume with replayFrom): in v2 the first rung is a
// resume that replays it, so the client gets the agent's own messages
// under their own messageIds, and a plain resume comes after it.
// mcpServers go with every rung: v2 agents do not keep them.
func (e *engine) climb(ctx context.Context, sid string, snap Snapshot, quiet, replay bool) (climbed, error) {
	caps := e.life.Caps()
	known := snap.Native != ""
	if replay && wire.Version(caps.Protocol) >= wire.V2 && caps.Resume && known {
		// Nothing is hushed: the replay is what the client asked for.
		params := openParams(snap)
		params["replayFrom"] = map[string]string{"type": "start"}
		cfg, got, err := e.rung(ctx, sid, snap, wire.SessionResume, params, 0)
		if err != nil {
			return climbed{}, err
		}
		switch got {
		case rungHeld:
			return climbed{native: snap.Native, cfg: cfg, path: "resume", replayed: true}, nil
		case rungUnknown:
			known = false
		}
	}
	native, cfg, path, err := e.ladder(ctx, sid, snap, quiet, known)
	return climbed{native: native, cfg: cfg, path: path, replayed: path == "load"}, err
}

// rungResult is how a rung of the ladder ended.
type rungResult int

const (
	// rungFailed: the agent did not bring the session back this way; the
	// next rung may.
	rungFailed rungResult = iota
	// rungHeld: the agent brought the session back.
	rungHeld
	// rungUnknown: the agent does not know the session (-32002), so no
	// rung that asks it for the session will bring it back: the climb
	// goes to a new session at once, where a load after a refused resume
	// cost claude-agent-acp 0.7 to 1.5 s for nothing.
	rungUnknown
)

// rung asks the agent to bring snap.Native back by method with params,
// keeping hush of what it says from the client (0: nothing), and says how
// that went. An agent that died ends the climb with an error, as the next
// rung would reach the agent that follows, inside an attempt that belongs
// to the one that died.
func (e *engine) rung(ctx context.Context, sid string, snap Snapshot, method string, params map[string]any, hush ledger.Hush) (*state.Config, rungResult, error) {
	gen := e.life.Gen()
	e.led.Update(func(f *ledger.Flight) { f.Natives.Opening(snap.Native) })
	done := func() {}
	if hush != 0 {
		done = e.led.Hush(snap.Native, hush)
	}
	res, err := e.callRaw(ctx, method, params)
	done()
	switch {
	case err == nil:
		// An earlier attempt that died after its session/new left sid
		// mapped to that one, which died with the agent.
		e.led.Update(func(f *ledger.Flight) { f.Remap(sid, snap.Native, gen) })
		e.agentCommands(snap.Native, res)
		return record.CarryLegacy(wire.ConfigFromResult(res), snap.Live), rungHeld, nil
	case agentLost(err):
		return nil, rungFailed, fmt.Errorf("rebuild %s: %w", sid, err)
	}
	if code, ok := proxy.CodeOfCall(err); ok && code == proxy.CodeResourceNotFound {
		e.log.Info(method+": the agent does not know the session; making a new one", "session", sid, "native", snap.Native)
		return nil, rungUnknown, nil
	}
	e.log.Info(method+" failed; trying the next rung", "session", sid, "err", err)
	return nil, rungFailed, nil
}

// ladder is the climb's v1 ladder, which v2 ends on too: resume, load,
// new, and which rung held. With known false the agent said it does not
// know the session, and the ladder goes straight to new.
func (e *engine) ladder(ctx context.Context, sid string, snap Snapshot, quiet, known bool) (string, *state.Config, string, error) {
	caps := e.life.Caps()
	params := openParams(snap)
	known = known && snap.Native != ""
	if lied := e.led.LiedOf(sid); lied != "" && lied == snap.Native {
		// The agent accepted this resume before and could not serve it
		// (codex-acp 2.6.0 with its thread gone): the next rung.
		e.log.Info("not resuming a session whose resume the agent could not serve", "session", sid, "native", snap.Native)
	} else if caps.Resume && known {
		// What the agent says while it resumes is about a resume the
		// client did not ask for ("recorded with model X but is resuming
		// with Y", codex-acp 2.6.0), and the restore that follows makes it
		// untrue: its messages are kept from the client.
		cfg, got, err := e.rung(ctx, sid, snap, wire.SessionResume, params, ledger.HushRebuild)
		if err != nil {
			return "", nil, "", err
		}
		switch got {
		case rungHeld:
			return snap.Native, cfg, "resume", nil
		case rungUnknown:
			known = false
		}
	}
	if caps.Load && known && e.freshLoadFails(caps, snap) {
		e.log.Info("not asking the agent to load a session it made less than a minute ago: it loses those; creating a new session", "session", sid, "agent", caps.Agent)
	} else if caps.Load && known {
		var hush ledger.Hush // the client asked for the history: its replay goes to it
		if quiet {
			hush = ledger.HushAll // the client has the history
		}
		cfg, got, err := e.rung(ctx, sid, snap, wire.SessionLoad, params, hush)
		if err != nil {
			return "", nil, "", err
		}
		if got == rungHeld {
			return snap.Native, cfg, "load", nil
		}
	}
	native, catalog, err := e.newNative(ctx, sid, snap)
	if err != nil {
		return "", nil, "", fmt.Errorf("rebuild %s: %w", sid, err)
	}
	return native, catalog, "new", nil
}

// agentCommands keeps the commands a v2 agent listed in the result of one
// of the sidecar's own opens of native: the client never sees that result,
// and the sidecar's own list after the rebuild must carry them
// (ledger.Flight.AgentCommands).
func (e *engine) agentCommands(native string, result json.RawMessage) {
	if wire.Version(e.life.Caps().Protocol) < wire.V2 {
		return
	}
	if list := wire.CommandList(wire.Member(result, "availableCommands")); list != nil {
		e.led.Update(func(f *ledger.Flight) { f.Natives.AgentCommands(native, list) })
	}
}

// freshLoadFails says whether the agent is known to fail a load of snap's
// native session now: it loses sessions it made within the last minute.
func (e *engine) freshLoadFails(caps life.Caps, snap Snapshot) bool {
	return caps.Habits.LosesFreshLoads && !snap.Born.IsZero() && e.now().Sub(snap.Born) < life.FreshLoadWindow
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

// restore moves a native session's config toward target, one step at a time
// as replay.Next decides, each after the previous answer, through the
// sidecar's own calls. It never stops at the first failure: every field that
// cannot be restored is named, so the user sees them all at once.
func (e *engine) restore(ctx context.Context, nativeID string, target, catalog *state.Config) Outcome {
	out := Outcome{Catalog: record.CloneConfig(catalog), target: target}
	if out.Catalog == nil {
		out.Catalog = &state.Config{}
	}
	done := map[string]bool{}
	var silent error // the agent stopped answering: the rest is not tried
	for {
		step, fe, ok := replay.Next(target, out.Catalog, done)
		if !ok {
			return out
		}
		done[step.Field] = true
		switch {
		case fe != nil:
			out.failed = append(out.failed, *fe)
			continue
		case step.Method == "":
			continue
		case silent != nil:
			out.failed = append(out.failed, replay.FieldError{Field: step.Field, Want: step.Value, Reason: "not tried: " + silent.Error()})
			continue
		}
		if err := e.runStep(ctx, nativeID, step, &out); err != nil {
			if agentLost(err) {
				// Nothing after this can land on the native session; the
				// rebuild starts again from its capture (Run).
				out.lost = true
				return out
			}
			out.failed = append(out.failed, replay.FieldError{Field: step.Field, Want: step.Value, Reason: err.Error()})
			if errors.Is(err, context.DeadlineExceeded) {
				// One bound for the agent's silence, not one per field.
				silent = fmt.Errorf("the agent did not answer %s", step.Method)
			}
			continue
		}
		out.applied = append(out.applied, step)
	}
}

func (e *engine) runStep(ctx context.Context, nativeID string, step replay.Step, out *Outcome) error {
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	switch step.Method {
	case replay.MethodSetConfigOption:
		var optionType string
		if o := out.Catalog.Option(step.OptionID); o != nil {
			optionType = o.Type
		}
		params := wire.SetOptionParams(wire.Version(e.life.Caps().Protocol), nativeID, step.OptionID, optionType, step.Value)
		var res wire.ConfigPayload
		if err := e.sc.Call(ctx, step.Method, params, &res); err != nil {
			return err
		}
		if opts, ok := wire.ParseOptions(res.ConfigOptions); ok {
			out.Catalog = record.WithOptions(out.Catalog, opts)
			out.OptionsRaw = wire.CompactJSON(res.ConfigOptions)
		}
		if step.Field == replay.FieldMode {
			out.modeSet = true
			var id string
			if json.Unmarshal(step.Value, &id) == nil && out.Catalog.Mode != nil {
				out.Catalog.Mode.Current = id
			}
		}
	case replay.MethodSetMode:
		var id string
		if err := json.Unmarshal(step.Value, &id); err != nil {
			return fmt.Errorf("mode value %s: %w", step.Value, err)
		}
		if err := e.sc.Call(ctx, step.Method, map[string]any{"sessionId": nativeID, "modeId": id}, nil); err != nil {
			return err
		}
		out.Catalog = record.WithLegacy(out.Catalog, "mode", id)
		out.modeSet = true
	case replay.MethodSetModel:
		var id string
		if err := json.Unmarshal(step.Value, &id); err != nil {
			return fmt.Errorf("model value %s: %w", step.Value, err)
		}
		if err := e.sc.Call(ctx, step.Method, map[string]any{"sessionId": nativeID, "modelId": id}, nil); err != nil {
			return err
		}
		out.Catalog = record.WithLegacy(out.Catalog, "model", id)
	default:
		return fmt.Errorf("unknown step %s", step.Method)
	}
	return nil
}

// unhushNew ends the hush create put on a native session it made.
func (e *engine) unhushNew(native string) {
	e.led.Update(func(f *ledger.Flight) { f.Natives.Unhush(native, ledger.HushRebuild) })
}
