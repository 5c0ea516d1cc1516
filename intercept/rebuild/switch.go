package rebuild

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
		fmt.Fprintf(&b, "\nconfig %s", ConfigLine(s.Config))
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

// OptionsOf is the configOptions list a session result reported, nil when
// the agent has none.
func OptionsOf(c *state.Config) json.RawMessage {
	if c == nil || len(c.Raw) == 0 {
		return nil
	}
	var p wire.ConfigPayload
	if json.Unmarshal(c.Raw, &p) != nil || wire.IsNull(p.ConfigOptions) {
		return nil
	}
	return p.ConfigOptions
}

// Lend readies a session to leave this agent: it refuses while a turn runs
// or a rebuild is under way, writes what the record holds, and keeps the
// session busy until the returned function says how the move ended. A
// session that moved is forgotten here; its native session stays with the
// agent, unused, and its late frames keep their client id.
func (b *Rebuilder) Lend(ctx context.Context, sid string) (done func(moved bool), err error) {
	end, what, ok := begin(b.led, sid, "switch")
	if !ok {
		return nil, wire.Refuse(proxy.CodeBusy, "a %s is already running on this session", what)
	}
	running := false
	err = b.rec.Do(ctx, func(ctx context.Context) {
		s := b.rec.Session(sid)
		if s == nil {
			return
		}
		if running = s.Turn != nil; !running {
			b.rec.PutSession(ctx, s)
			b.rec.Flush(ctx)
		}
	})
	if err == nil && running {
		err = wire.Refuse(proxy.CodeBusy, "a turn is running; cancel it or wait for it to end, then switch agents")
	}
	if err != nil {
		end()
		return nil, err
	}
	return func(moved bool) {
		if moved {
			b.rec.Do(context.WithoutCancel(ctx), func(context.Context) { b.rec.SetSession(sid, nil) })
			b.led.Update(func(f *ledger.Flight) { f.Sessions.Forget(sid) })
		}
		end()
	}, nil
}
