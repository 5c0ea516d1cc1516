package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Error is a refusal the client should read: it carries the JSON-RPC code
// the answer uses.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errorCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return proxy.CodeInternalError
}

func refuse(code int, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// begin marks sid busy with what; it fails, saying what runs, when a
// rebuild runs on it already.
func begin(led *ledger.Ledger, sid, what string) (cur string, ok bool) {
	led.Update(func(f *ledger.Flight) { cur, ok = f.Begin(sid, what) })
	return cur, ok
}

// report says what a rebuild or restore did, for the slash command's message
// and the `_sidecar/*` result alike.
type report struct {
	SessionID       string              `json:"sessionId"`
	NativeSessionID string              `json:"nativeSessionId"`
	Restored        []string            `json:"restored"`
	Failed          []replay.FieldError `json:"failed"`
	Blocked         bool                `json:"blocked"`
	Config          map[string]string   `json:"config"`
}

func (r report) text(what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "acp-sidecar: %s done", what)
	if what == "reset" {
		b.WriteString(": a fresh context")
	}
	if len(r.Config) > 0 {
		b.WriteString(", config ")
		b.WriteString(configLine(r.Config))
	}
	if len(r.Restored) > 0 {
		fmt.Fprintf(&b, " (restored: %s)", strings.Join(r.Restored, ", "))
	}
	b.WriteString(".")
	if len(r.Failed) > 0 {
		b.WriteString("\nThese could not be restored:")
		for _, f := range r.Failed {
			fmt.Fprintf(&b, "\n- %s = %s: %s", f.Field, f.Want, f.Reason)
		}
		b.WriteString("\nPrompts are refused until you send /reset to try again or /accept-config to continue on the agent's current config.")
	}
	return b.String()
}

func configLine(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

// configMap is a config's current values as text, model and mode by category.
func configMap(c *state.Config) map[string]string {
	out := map[string]string{}
	if c == nil {
		return out
	}
	for _, o := range c.Options {
		out[o.ID] = wire.Unquote(o.Current)
	}
	if c.Model != nil && c.ByCategory("model") == nil {
		out["model"] = c.Model.Current
	}
	if c.Mode != nil && c.ByCategory("mode") == nil {
		out["mode"] = c.Mode.Current
	}
	return out
}

// spawn runs fn on a goroutine the recorder owns; Close waits for it.
func (r *Recorder) spawn(fn func(ctx context.Context)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn(r.ctx)
	}()
}

// do runs fn on the recorder's goroutine, where the sessions live, and waits
// for it. Never call it from that goroutine.
func (r *Recorder) do(ctx context.Context, fn func(ctx context.Context)) error {
	done := make(chan struct{})
	ev := event{fn: func(ctx context.Context) {
		defer close(done)
		fn(ctx)
	}}
	select {
	case r.events <- ev:
	case <-r.done:
		return errors.New("the recorder has stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-r.done:
		return errors.New("the recorder has stopped")
	}
}

// snapshot is what a rebuild needs of a session, copied off the recorder.
type snapshot struct {
	native  string
	live    *state.Config
	orig    *state.Config
	cwd     string
	mcp     json.RawMessage
	dirs    []string
	running bool
}

func (r *Recorder) snapshot(ctx context.Context, sid string) (snapshot, error) {
	var snap snapshot
	err := r.onSession(ctx, sid, func(_ context.Context, s *session) {
		snap = snapshot{
			native: s.rec.NativeID, live: cloneConfig(s.rec.Live), orig: cloneConfig(s.rec.Original),
			cwd: s.rec.Cwd, mcp: s.rec.McpServers, dirs: s.rec.AdditionalDirectories, running: s.turn != nil,
		}
	})
	return snap, err
}

// onSession runs fn on the recorder's goroutine with the session sid, or
// refuses when the recorder holds no such session.
func (r *Recorder) onSession(ctx context.Context, sid string, fn func(ctx context.Context, s *session)) error {
	found := false
	err := r.do(ctx, func(ctx context.Context) {
		if s := r.sessions[sid]; s != nil {
			found = true
			fn(ctx, s)
		}
	})
	if err == nil && !found {
		err = refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid)
	}
	return err
}

// Reset gives a session a fresh native session with the same config: the
// conversation is cleared on purpose, the client's id stays. The capture is
// taken before the fresh session exists, so nothing it reports can change
// the target (DESIGN.md "Rebuilding a native session", step 1).
func (r *Recorder) Reset(ctx context.Context, sid string) (report, error) {
	if what, ok := begin(r.led, sid, "reset"); !ok {
		return report{}, refuse(proxy.CodeBusy, "a %s is already running on this session", what)
	}
	defer r.led.Update(func(f *ledger.Flight) { f.End(sid) })
	snap, err := r.snapshot(ctx, sid)
	if err != nil {
		return report{}, err
	}
	if snap.running {
		return report{}, refuse(proxy.CodeBusy, "a turn is running; cancel it or wait for it to end, then reset")
	}
	capture := r.led.TargetOr(sid, snap.live)
	var rep report
	err = r.eng.rebuilding(ctx, sid, capture, func(ctx context.Context, gen uint64) (bool, error) {
		native, catalog, err := r.eng.newNative(ctx, sid, snap)
		if err != nil {
			return agentLost(err), fmt.Errorf("reset %s: %w", sid, err)
		}
		out := r.eng.restore(ctx, native, capture, catalog)
		if r.eng.lostSince(gen, out) {
			return true, nil
		}
		rep = r.settle(ctx, sid, native, out, func(s *session) {
			s.rec.ContextFrom = len(s.turns) + 1
			s.rec.Handoff = nil
		})
		r.eng.settled(sid, gen) // the fresh session lives on the agent that is up now
		return false, nil
	})
	return rep, err
}

// settle records a rebuild's outcome, blocks the session when a field
// failed, and tells the client what changed.
func (r *Recorder) settle(ctx context.Context, sid, native string, out outcome, also func(*session)) report {
	rep := report{SessionID: sid, NativeSessionID: native, Failed: out.failed, Blocked: len(out.failed) > 0, Config: configMap(out.catalog)}
	for _, s := range out.applied {
		rep.Restored = append(rep.Restored, s.Field)
	}
	var blocked *state.Blocked
	if len(out.failed) > 0 {
		blocked = blockedBy(out, r.cfg.Now())
		r.led.Update(func(f *ledger.Flight) { f.Owe(sid, out.target) })
	} else {
		r.led.Update(func(f *ledger.Flight) { f.Owe(sid, nil) })
	}
	r.led.Update(func(f *ledger.Flight) { f.SetBlocked(sid, blocked) })
	err := r.do(ctx, func(ctx context.Context) {
		s := r.sessions[sid]
		if s == nil {
			return
		}
		if s.rec.NativeID != native {
			s.rec.NativeID = native
			s.rec.NativeHistory = append(s.rec.NativeHistory, native)
		}
		s.rec.Live = out.catalog
		s.rec.Blocked = blocked
		if also != nil {
			also(s)
		}
		r.putSession(ctx, s)
		r.flush(ctx)
	})
	if err != nil {
		// Only a stopping recorder refuses: the session lives on the
		// fresh native session, and the record keeps the one before.
		r.log.Error("rebuilt session not recorded", "session", sid, "native", native, "err", err)
	}
	for _, line := range out.notifications(sid) {
		r.send(proxy.AgentToClient, line)
	}
	if blocked != nil {
		r.log.Error("restore failed; prompts to this session are refused", "session", sid, "fields", strings.Join(blocked.Fields, ","))
	}
	return rep
}

// blockedBy is the mark of a session whose restore failed: the fields it
// names refuse prompts until the user resets or accepts (fail closed).
func blockedBy(out outcome, at time.Time) *state.Blocked {
	re := &replay.RestoreError{Fields: out.failed}
	return &state.Blocked{Fields: re.Names(), Reason: re.Error(), At: at}
}

// RestoreOriginal applies the session's immutable original to its current
// native session, and records those values as the client's explicit
// selections. A session without an original is refused and left unchanged:
// nothing reconstructs one from mutable data.
func (r *Recorder) RestoreOriginal(ctx context.Context, sid string) (report, error) {
	if what, ok := begin(r.led, sid, "restore-original"); !ok {
		return report{}, refuse(proxy.CodeBusy, "a %s is already running on this session", what)
	}
	defer r.led.Update(func(f *ledger.Flight) { f.End(sid) })
	if err := r.do(ctx, func(ctx context.Context) { r.fixOriginal(ctx, sid) }); err != nil {
		return report{}, fmt.Errorf("restore-original %s: %w", sid, err)
	}
	var rep report
	err := r.eng.rebuilding(ctx, sid, nil, func(ctx context.Context, gen uint64) (bool, error) {
		snap, err := r.snapshot(ctx, sid)
		if err != nil {
			return false, err
		}
		if snap.orig == nil {
			return false, refuse(proxy.CodeInvalidParams, "session %s has no recorded original config (it was recorded before originals existed, or imported); nothing was changed", sid)
		}
		native, catalog, path := snap.native, snap.live, ""
		if r.led.IsStale(sid) {
			// The agent died under an earlier attempt: the session needs a
			// native session again before the original goes onto it.
			if native, catalog, path, err = r.eng.climb(ctx, sid, snap, true); err != nil {
				return agentLost(err), err
			}
		}
		out := r.eng.restore(ctx, native, snap.orig, catalog)
		if r.eng.lostSince(gen, out) {
			return true, nil
		}
		rep = r.settle(ctx, sid, native, out, func(s *session) {
			if path == "new" {
				r.arm(s)
			}
			if len(out.failed) > 0 {
				return
			}
			now := r.cfg.Now()
			for _, o := range snap.orig.Options {
				s.rec.Overrides = append(s.rec.Overrides, state.Override{OptionID: o.ID, Category: o.Category, Value: o.Current, At: now})
			}
			for _, l := range []struct {
				field string
				leg   *state.Legacy
			}{{"model", snap.orig.Model}, {"mode", snap.orig.Mode}} {
				if l.leg != nil && snap.orig.ByCategory(l.field) == nil {
					v := wire.String(l.leg.Current)
					s.rec.Overrides = append(s.rec.Overrides, state.Override{OptionID: l.field, Category: l.field, Value: v, At: now})
				}
			}
		})
		r.eng.settled(sid, gen)
		return false, nil
	})
	return rep, err
}

// AcceptConfig lifts a block: the session goes on with what the agent has.
func (r *Recorder) AcceptConfig(ctx context.Context, sid string) error {
	if _, err := r.snapshot(ctx, sid); err != nil {
		return err
	}
	r.led.Update(func(f *ledger.Flight) { f.SetBlocked(sid, nil) })
	r.led.Update(func(f *ledger.Flight) { f.Owe(sid, nil) })
	return r.do(ctx, func(ctx context.Context) {
		if s := r.sessions[sid]; s != nil {
			s.rec.Blocked = nil
			r.putSession(ctx, s)
			r.flush(ctx)
		}
	})
}

// Status is the `_sidecar/status` result.
func (r *Recorder) Status(ctx context.Context, sid string) (map[string]any, error) {
	var res map[string]any
	err := r.onSession(ctx, sid, func(_ context.Context, s *session) {
		kept := 0
		for _, t := range s.turns {
			if t.Status != state.TurnRolledBack {
				kept++
			}
		}
		res = map[string]any{
			"sessionId": sid, "nativeSessionId": s.rec.NativeID, "nativeHistory": s.rec.NativeHistory,
			"live": configMap(s.rec.Live), "original": nilOr(s.rec.Original), "blocked": s.rec.Blocked,
			"turns": len(s.turns), "keptTurns": kept,
		}
		if r.cfg.Name != "" {
			res["agent"] = r.cfg.Name
		}
	})
	return res, err
}

func nilOr(c *state.Config) any {
	if c == nil {
		return nil
	}
	return configMap(c)
}

// StatusText is `/sidecar-status`.
func (r *Recorder) StatusText(ctx context.Context, sid string) (string, error) {
	st, err := r.Status(ctx, sid)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "acp-sidecar: session %s, native session %v", sid, st["nativeSessionId"])
	if a, ok := st["agent"].(string); ok {
		fmt.Fprintf(&b, " on agent %s", a)
	}
	fmt.Fprintf(&b, "\nconfig: %s\nturns: %v (%v kept)", configLine(st["live"].(map[string]string)), st["turns"], st["keptTurns"])
	if blocked, ok := st["blocked"].(*state.Blocked); ok && blocked != nil {
		fmt.Fprintf(&b, "\nblocked: %s", blocked.Reason)
	}
	return b.String(), nil
}
