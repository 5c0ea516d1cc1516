package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// A native session belongs to its agent and its provider, so a session that
// moves to another agent always gets a fresh native session there, and its
// continuity comes from the record (the kept turns handed over), never from
// a live session. These are the recorder's two halves of a move: Lend on
// the agent it leaves, Adopt on the agent it joins.

// SwitchReport says what a move did, for the slash command's message and
// the set_config_option answer alike.
type SwitchReport struct {
	SessionID       string            `json:"sessionId"`
	Agent           string            `json:"agent"`
	NativeSessionID string            `json:"nativeSessionId"`
	Carried         []string          `json:"carried"`
	NotCarried      []string          `json:"notCarried"`
	KeptTurns       int               `json:"keptTurns"`
	Config          map[string]string `json:"config"`
	// Options is the target's configOptions list after the move, for the
	// answer the client sees; nil when the agent has none.
	Options json.RawMessage `json:"-"`
}

// Text is the report in words, for the slash command's message; from is the
// agent the session left.
func (s SwitchReport) Text(from string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "acp-sidecar: this session now runs on %s", s.Agent)
	if from != "" {
		fmt.Fprintf(&b, " (was %s)", from)
	}
	fmt.Fprintf(&b, ", in a fresh native session; %d kept turn(s) go with your next prompt.", s.KeptTurns)
	if len(s.Config) > 0 {
		fmt.Fprintf(&b, "\nconfig %s", configLine(s.Config))
	}
	if len(s.Carried) > 0 {
		fmt.Fprintf(&b, "\ncarried over: %s", strings.Join(s.Carried, ", "))
	}
	if len(s.NotCarried) > 0 {
		b.WriteString("\nnot carried over:")
		for _, n := range s.NotCarried {
			fmt.Fprintf(&b, "\n- %s", n)
		}
	}
	return b.String()
}

// Lend readies a session to leave this agent: it refuses while a turn runs
// or a rebuild is under way, writes what the record holds, and keeps the
// session busy until the returned function says how the move ended. A
// session that moved is forgotten here; its native session stays with the
// agent, unused, and its late frames keep their client id.
func (r *Recorder) Lend(ctx context.Context, sid string) (done func(moved bool), err error) {
	if what, ok := begin(r.led, sid, "switch"); !ok {
		return nil, refuse(proxy.CodeBusy, "a %s is already running on this session", what)
	}
	running := false
	err = r.do(ctx, func(ctx context.Context) {
		s := r.sessions[sid]
		if s == nil {
			return
		}
		if running = s.turn != nil; !running {
			r.putSession(ctx, s)
			r.flush(ctx)
		}
	})
	if err == nil && running {
		err = refuse(proxy.CodeBusy, "a turn is running; cancel it or wait for it to end, then switch agents")
	}
	if err != nil {
		r.led.Update(func(f *ledger.Flight) { f.End(sid) })
		return nil, err
	}
	return func(moved bool) {
		if moved {
			r.do(context.WithoutCancel(ctx), func(context.Context) { delete(r.sessions, sid) })
			r.led.Update(func(f *ledger.Flight) { f.Forget(sid) })
		}
		r.led.Update(func(f *ledger.Flight) { f.End(sid) })
	}, nil
}

// Adopt takes over a session another agent ran, from the record: a fresh
// native session with the same cwd, MCP servers and directories; this
// agent's start-up settings; the mode carried over when this agent offers
// the same mode id (models and other options stay with their agent); and a
// handoff of every kept turn, whichever agent ran it, armed for the next
// prompt. What did not carry is reported, not blocking: the user chose the
// move, and the agent's own values are a sound place to start.
func (r *Recorder) Adopt(ctx context.Context, sid string) (SwitchReport, error) {
	var rep SwitchReport
	if _, err := r.Run(ctx, r.adoptPlan(sid, &rep)); err != nil {
		r.do(context.WithoutCancel(ctx), func(context.Context) { delete(r.sessions, sid) })
		r.led.Update(func(f *ledger.Flight) { f.Forget(sid) })
		return SwitchReport{}, err
	}
	return rep, nil
}

// carry sets on target the mode of from when target offers the same mode
// id, and says in words what carried and what did not.
func carry(from, target *state.Config, agent string) (carried, not []string) {
	if from == nil {
		return nil, nil
	}
	if m := modelOf(from); m != "" {
		not = append(not, fmt.Sprintf("model=%s: models never carry between agents", m))
	}
	if m := modeOf(from); m != "" {
		if setMode(target, m) {
			carried = append(carried, "mode="+m)
		} else {
			not = append(not, fmt.Sprintf("mode=%s: %s offers no mode with this id", m, agent))
		}
	}
	for _, o := range from.Options {
		if o.Category == replay.FieldModel || o.Category == replay.FieldMode {
			continue
		}
		not = append(not, fmt.Sprintf("%s=%s: options stay with the agent that offers them", o.ID, wire.Unquote(o.Current)))
	}
	return carried, not
}

func modelOf(c *state.Config) string {
	if o := c.ByCategory(replay.FieldModel); o != nil {
		return wire.Unquote(o.Current)
	}
	if c.Model != nil {
		return c.Model.Current
	}
	return ""
}

func modeOf(c *state.Config) string {
	if o := c.ByCategory(replay.FieldMode); o != nil {
		return wire.Unquote(o.Current)
	}
	if c.Mode != nil {
		return c.Mode.Current
	}
	return ""
}

// setMode puts mode into target where the agent offers it, by category
// option or legacy mode, and reports whether it did.
func setMode(target *state.Config, mode string) bool {
	val, _ := json.Marshal(mode)
	if o := target.ByCategory(replay.FieldMode); o != nil {
		for _, v := range o.Values {
			if wire.Unquote(v.Value) == mode {
				o.Current = val
				return true
			}
		}
		return false
	}
	if target.Mode != nil && slices.Contains(target.Mode.Available, mode) {
		target.Mode.Current = mode
		return true
	}
	return false
}

// optionsOf is the configOptions list a session result reported, nil when
// the agent has none.
func optionsOf(c *state.Config) json.RawMessage {
	if c == nil || len(c.Raw) == 0 {
		return nil
	}
	var p wire.ConfigPayload
	if json.Unmarshal(c.Raw, &p) != nil || wire.IsNull(p.ConfigOptions) {
		return nil
	}
	return p.ConfigOptions
}

// ConfigOptions is a session's configOptions list as the agent last
// reported it, for a move that finds the session already where it should be.
func (r *Recorder) ConfigOptions(ctx context.Context, sid string) (json.RawMessage, error) {
	var out json.RawMessage
	err := r.onSession(ctx, sid, func(_ context.Context, s *session) { out = optionsOf(s.rec.Live) })
	return out, err
}

// Revive brings back, from the record, a session this agent ran before it
// was started again: the session is rebuilt on its next request, by the
// same ladder as after a crash (resume, load, or new with a handoff).
func (r *Recorder) Revive(ctx context.Context, sid string) error {
	var err error
	if derr := r.do(ctx, func(ctx context.Context) { _, err = r.revive(ctx, sid) }); derr != nil {
		return derr
	}
	return err
}

// revive loads a session the recorder does not hold from the store and
// marks it stale; it reports whether the session was already held. It runs
// on the recorder's goroutine.
func (r *Recorder) revive(ctx context.Context, sid string) (held bool, err error) {
	if r.sessions[sid] != nil {
		return true, nil
	}
	old, err := r.cfg.Store.Session(ctx, sid)
	if err != nil {
		return false, err
	}
	s := &session{rec: *old, started: true}
	if turns, err := r.cfg.Store.Turns(ctx, sid); err == nil {
		s.turns = turns
	}
	r.sessions[sid] = s
	r.led.Update(func(f *ledger.Flight) {
		f.Remap(sid, old.NativeID, f.Life())
		f.MarkStale(sid)
	})
	return false, nil
}
