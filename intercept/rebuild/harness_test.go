package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"
)

// A rebuild that leaves a goroutine behind (an attempt still waiting for
// the agent, a spawned plan) is a bug the tests would otherwise miss.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is how long any one test waits for what it expects: generous, so
// a loaded machine never fails a test, and still an end to a hang.
const bound = 60 * time.Second

// clock is the rebuilds' and the record's time: fixed, so that what they
// write compares equal across runs.
var clock = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// call is one of the sidecar's own calls as the fake agent received it.
type call struct {
	Method string
	Params json.RawMessage
	Life   uint64 // the agent's generation when the call reached it
	// Unread: no live agent read it (it died, or was not back yet), and
	// the call failed with the agent gone.
	Unread bool
}

// String reads as the agent's side of a restore does in a log: the method,
// then what it sets.
func (c call) String() string {
	var p struct {
		ConfigID string          `json:"configId"`
		Value    json.RawMessage `json:"value"`
		ModeID   string          `json:"modeId"`
		ModelID  string          `json:"modelId"`
	}
	_ = json.Unmarshal(c.Params, &p) // the sidecar's own params always decode
	switch {
	case p.ConfigID != "":
		return c.Method + " " + p.ConfigID + "=" + wire.Unquote(p.Value)
	case p.ModeID != "":
		return c.Method + " " + p.ModeID
	case p.ModelID != "":
		return c.Method + " " + p.ModelID
	}
	return c.Method
}

// fakeAgent is the agent behind the Sidecar the Rebuilder binds to, in
// process: the rebuilds talk to the agent only through Call and Send, so
// answering those as an ACP agent would tests them without a relay, pipes
// or a process. It keeps each native session's option values, answers
// with the full option list, and, like real agents, offers some values
// only under some models (effort "max" under "deep-3") and starts every
// session it makes or brings back on its defaults. Its options are listed
// in an order that is neither the restore order nor the ids' order, so a
// restore that followed the catalog would show.
type fakeAgent struct {
	life *life.Life
	// legacyModes: the mode is the legacy `modes` picker (session/set_mode),
	// not a mode-category option.
	legacyModes bool

	mu       sync.Mutex
	next     int
	sessions map[string]map[string]string // native id -> option id -> value
	calls    []call
	sent     [][]byte
	// gone are the lives a call failed in with the agent gone: like the
	// relay's connection to a dead agent, they answer nothing more.
	gone map[uint64]bool
	// before sees each call before the agent handles it; an error it
	// returns is the call's answer. after sees each call the agent
	// handled, before its answer goes back.
	before func(c call) error
	after  func(c call)
}

var _ Sidecar = (*fakeAgent)(nil)

// defaults are the values the fake agent puts a session it makes on.
func defaults() map[string]string {
	return map[string]string{"tone": "plain", "effort": "low", "a-mode": "ask", "zz-model": "fast-1"}
}

// offers lists what option id offers under the session's values v.
func (a *fakeAgent) offers(v map[string]string, id string) []string {
	switch id {
	case "tone":
		return []string{"plain", "warm"}
	case "effort":
		if v["zz-model"] == "deep-3" {
			return []string{"low", "high", "max"}
		}
		return []string{"low", "high"}
	case "a-mode":
		if a.legacyModes {
			return nil // not an option on this agent
		}
		return []string{"ask", "plan", "code"}
	case "zz-model":
		return []string{"fast-1", "deep-3"}
	}
	return nil
}

// config is a session result with the values v, as the agent words it.
func (a *fakeAgent) config(v map[string]string) map[string]any {
	var opts []any
	for _, id := range []string{"tone", "effort", "a-mode", "zz-model"} {
		vals := a.offers(v, id)
		if vals == nil {
			continue
		}
		var choices []any
		for _, x := range vals {
			choices = append(choices, map[string]any{"value": x, "name": x})
		}
		o := map[string]any{"id": id, "name": id, "type": "select", "currentValue": v[id], "options": choices}
		switch id {
		case "effort":
			o["category"] = "thought_level"
		case "a-mode":
			o["category"] = "mode"
		case "zz-model":
			o["category"] = "model"
		}
		opts = append(opts, o)
	}
	res := map[string]any{"configOptions": opts}
	if a.legacyModes {
		var modes []any
		for _, m := range []string{"ask", "plan", "code"} {
			modes = append(modes, map[string]any{"id": m, "name": m})
		}
		res["modes"] = map[string]any{"currentModeId": v["a-mode"], "availableModes": modes}
	}
	return res
}

// configOf is the config the record would hold for a session of this
// agent on the values v: what a seeded session's live is made of.
func (a *fakeAgent) configOf(v map[string]string) *state.Config {
	raw, err := json.Marshal(a.config(v))
	if err != nil {
		panic(err) // maps of strings always encode
	}
	return wire.ConfigFromResult(raw)
}

// adopt makes the fake agent know a native session on the values v, as
// an agent knows the sessions an earlier life of it made.
func (a *fakeAgent) adopt(native string, v map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessions[native] = v
}

func (a *fakeAgent) Call(ctx context.Context, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("call %s: encode params: %w", method, err)
	}
	c := call{Method: method, Params: raw, Life: a.life.Gen()}
	a.mu.Lock()
	c.Unread = a.gone[c.Life] || a.life.Phase() != life.Up
	a.calls = append(a.calls, c)
	before, after := a.before, a.after
	a.mu.Unlock()
	if c.Unread {
		return fmt.Errorf("call %s: %w", method, proxy.ErrAgentGone)
	}
	if before != nil {
		if err := before(c); err != nil {
			if errors.Is(err, proxy.ErrAgentGone) {
				a.mu.Lock()
				a.gone[c.Life] = true
				a.mu.Unlock()
			}
			return err
		}
	}
	res, err := a.handle(c)
	if err != nil {
		return fmt.Errorf("call %s: %w", method, err)
	}
	if after != nil {
		after(c)
	}
	if result == nil {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("call %s: encode result: %w", method, err)
	}
	if err := json.Unmarshal(b, result); err != nil {
		return fmt.Errorf("call %s: decode result: %w", method, err)
	}
	return nil
}

// handle answers one call as the agent would.
func (a *fakeAgent) handle(c call) (any, error) {
	var p struct {
		SessionID string          `json:"sessionId"`
		ConfigID  string          `json:"configId"`
		Value     json.RawMessage `json:"value"`
		ModeID    string          `json:"modeId"`
	}
	if err := json.Unmarshal(c.Params, &p); err != nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: err.Error()}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.sessions[p.SessionID]
	switch c.Method {
	case wire.SessionNew, wire.SessionFork:
		if c.Method == wire.SessionFork && v == nil {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "no session " + p.SessionID}
		}
		id := fmt.Sprintf("native-%d", a.next+1)
		a.next++
		a.sessions[id] = defaults()
		res := a.config(a.sessions[id])
		res["sessionId"] = id
		return res, nil
	case wire.SessionResume, wire.SessionLoad:
		if v == nil {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "no session " + p.SessionID}
		}
		// Agents drop the chosen config when they bring a session back.
		a.sessions[p.SessionID] = defaults()
		return a.config(a.sessions[p.SessionID]), nil
	case wire.SetConfigOption:
		var val string
		if v == nil || json.Unmarshal(p.Value, &val) != nil || !slices.Contains(a.offers(v, p.ConfigID), val) {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: fmt.Sprintf("%s does not take %s", p.ConfigID, p.Value)}
		}
		v[p.ConfigID] = val
		if !slices.Contains(a.offers(v, "effort"), v["effort"]) {
			v["effort"] = "low" // the new model does not offer it
		}
		return map[string]any{"configOptions": a.config(v)["configOptions"]}, nil
	case wire.SetMode:
		if v == nil || !a.legacyModes || !slices.Contains([]string{"ask", "plan", "code"}, p.ModeID) {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "no mode " + p.ModeID}
		}
		v["a-mode"] = p.ModeID
		return map[string]any{}, nil
	}
	return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: c.Method}
}

func (a *fakeAgent) Send(dir proxy.Direction, line []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = append(a.sent, append([]byte(nil), line...))
	return nil
}

// Again is the relay's: the rebuilds never decide a client request.
func (a *fakeAgent) Again(context.Context, []byte) error {
	return errors.New("the rebuilds' fake relay decides no client request")
}

// script sets the hooks under the lock, so that a test may change them
// while a plan runs on another goroutine.
func (a *fakeAgent) script(before func(call) error, after func(call)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.before, a.after = before, after
}

// received lists the calls the agent read in its life gen, as strings, so
// a test compares a whole restore's sequence in one diff.
func (a *fakeAgent) received(gen uint64) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.calls {
		if c.Life == gen && !c.Unread {
			out = append(out, c.String())
		}
	}
	return out
}

// all is every call the agent got, read or not, whatever its life: a plan
// that must leave the agent alone shows here if it did not.
func (a *fakeAgent) all() []call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// lines are the frames the rebuilds sent of their own: what the client
// was told, which must name the client's id and only what the agent took.
func (a *fakeAgent) lines() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sent)
}

// harness is the Rebuilder wired as intercept.New wires it, on the owners
// themselves (a record over a memory store, a ledger, the agent's life,
// a Watch), with the fake agent in the relay's place: the rebuilds are
// tested on the real owners they change, and nothing else.
type harness struct {
	t     *testing.T
	host  string
	cwd   string // the sessions' working directory, the test's own
	store state.Store
	led   *ledger.Ledger
	life  *life.Life
	rec   *record.Recorder
	rb    *Rebuilder
	agent *fakeAgent

	// gaveUp gets a value each time a rebuild gives up an attempt the
	// agent died under and begins to wait for it (Rebuilder.lost): a test
	// that brings the agent back only then knows no call of the dead
	// attempt can reach the agent that came back.
	gaveUp chan struct{}

	closeOnce sync.Once
	quit      chan struct{}
}

// lostWatch is a slog.Handler that tells of the one log line that marks
// an attempt given up: the rebuilds have no other sign of it, and a test
// must not guess with a sleep.
type lostWatch struct{ gaveUp chan<- struct{} }

func (w lostWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w lostWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "the agent exited during a rebuild") {
		select {
		case w.gaveUp <- struct{}{}:
		default: // nobody waits for more than the channel holds
		}
	}
	return nil
}

func (w lostWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w lostWatch) WithGroup(string) slog.Handler      { return w }

// options are the harness's knobs: what the agent is, and where it runs.
type options struct {
	host        string    // Config.Host ("" unknown)
	caps        life.Caps // what the agent says it can do
	legacyModes bool      // the mode is the legacy picker
}

func newHarness(t *testing.T, opts options) *harness {
	t.Helper()
	ready := life.NewSignal()
	h := &harness{t: t, host: opts.host, cwd: t.TempDir(), store: state.NewMemory(), led: ledger.New(ready.Fire), life: life.New(ready),
		gaveUp: make(chan struct{}, 16), quit: make(chan struct{})}
	h.life.LearnCaps(opts.caps)
	h.agent = &fakeAgent{life: h.life, legacyModes: opts.legacyModes, sessions: map[string]map[string]string{}, gone: map[uint64]bool{}}
	now := func() time.Time { return clock }
	// No frames flow through the record here, so it never calls its Then.
	h.rec = record.New(record.Config{Store: h.store, Host: opts.host, Now: now}, h.led, h.life)
	watch := &Watch{Life: h.life, Ready: ready, Quit: h.quit, Timeout: bound}
	h.rb = New(Config{Store: h.store, Agent: []string{"fakeagent"}, Host: opts.host, CallTimeout: bound, Now: now,
		Log: slog.New(lostWatch{gaveUp: h.gaveUp})}, h.rec, h.led, h.life, watch)
	h.rb.Bind(h.agent)
	h.rb.Start(context.Background())
	h.rec.Start(context.Background())
	t.Cleanup(h.close)
	return h
}

// close stops the record, which waits for every plan it spawned: a test
// that must see what an async plan did after its last visible step calls
// it, and the cleanup calls it again for the others.
func (h *harness) close() {
	h.closeOnce.Do(func() {
		close(h.quit)
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := h.rec.Close(ctx); err != nil {
			h.t.Errorf("close the record: %v", err)
		}
	})
}

// ctx bounds one test's waits, so a rebuild that hangs fails the test
// instead of the whole run.
func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(h.t.Context(), bound)
	h.t.Cleanup(cancel)
	return ctx
}

// turn is a completed turn on native, as the record keeps one.
func turn(i int, native, prompt string) state.Turn {
	return state.Turn{Index: i, PromptText: prompt, Answer: "answer to " + prompt, NativeID: native, Status: state.TurnCompleted, Started: clock, Ended: clock}
}

// session is a record session as the record holds one after the client's
// session/new on native and its config changes: its live on the values v,
// its original the same, and the native session made on this harness's
// host.
func (h *harness) session(sid, native string, v map[string]string, turns ...state.Turn) *record.Session {
	live := h.agent.configOf(v)
	return &record.Session{
		Rec: state.Session{
			ClientID: sid, NativeID: native, NativeHistory: []string{native},
			Natives: []state.Native{{ID: native, Event: state.MadeNew, Path: "new", Host: h.host, At: clock}},
			Agent:   []string{"fakeagent"}, Cwd: h.cwd, McpServers: json.RawMessage("[]"),
			Created: clock, Live: live, Original: record.CloneConfig(live), Baseline: h.agent.configOf(defaults()),
		},
		Turns: turns, Started: true,
	}
}

// seed puts s in the record, the store and the ledger, and its native
// session in the agent, as a session the client opened and used stands
// when a rebuild begins.
func (h *harness) seed(s *record.Session) {
	h.t.Helper()
	sid, native := s.Rec.ClientID, s.Rec.NativeID
	err := h.rec.Do(h.ctx(), func(ctx context.Context) {
		h.rec.SetSession(sid, s)
		h.rec.PutSession(ctx, s)
		for i := range s.Turns {
			h.rec.PutTurn(ctx, s, &s.Turns[i])
		}
	})
	if err != nil {
		h.t.Fatalf("seed session %s: %v", sid, err)
	}
	h.led.Update(func(f *ledger.Flight) { f.Remap(sid, native, h.life.Gen()) })
	if live := s.Rec.Live; live != nil {
		v := defaults()
		for id, val := range ConfigMap(live) {
			if id == "mode" {
				id = "a-mode" // the legacy picker's value, under the fake's own name
			}
			v[id] = val
		}
		h.agent.adopt(native, v)
	}
}

// stored is the session's record as the store has it: what a settle
// wrote, not what the record's goroutine still holds.
func (h *harness) stored(sid string) *state.Session {
	h.t.Helper()
	s, err := h.store.Session(h.ctx(), sid)
	if err != nil {
		h.t.Fatalf("read session %s: %v", sid, err)
	}
	return s
}

// storedTurns are the session's turns as the store has them.
func (h *harness) storedTurns(sid string) []state.Turn {
	h.t.Helper()
	turns, err := h.store.Turns(h.ctx(), sid)
	if err != nil {
		h.t.Fatalf("read turns of %s: %v", sid, err)
	}
	return turns
}

// inRecord runs fn on the record's working copy of sid, on the record's
// goroutine, where alone it may be read.
func (h *harness) inRecord(sid string, fn func(s *record.Session)) {
	h.t.Helper()
	if err := h.rec.OnSession(h.ctx(), sid, func(_ context.Context, s *record.Session) { fn(s) }); err != nil {
		h.t.Fatalf("read session %s in the record: %v", sid, err)
	}
}

// kill is the agent's death as the supervisor tells it (intercept.Agent.End):
// the life moves to the next generation and every session with a native
// session is marked stale, in that order.
func (h *harness) kill() {
	gen := h.life.Gone("killed by the test")
	h.led.Update(func(f *ledger.Flight) { f.AgentGone(gen) })
}

// owed is what the ledger says a rebuild of sid owes, as values; nil when
// nothing is owed.
func (h *harness) owed(sid string) map[string]string {
	c := h.led.TargetOr(sid, nil)
	if c == nil {
		return nil
	}
	return ConfigMap(c)
}

// armed takes the handoff the ledger armed for sid's next prompt, as the
// commands stage does: the only way the ledger tells what is armed.
func (h *harness) armed(sid string) (string, bool) {
	var text string
	var ok bool
	h.led.Update(func(f *ledger.Flight) {
		ho, got := f.Sessions.TakeHandoff(sid)
		text, ok = ho.Text, got
	})
	return text, ok
}

// codeOf is the JSON-RPC code a refusal answers the client with, 0 for an
// error that is not one.
func codeOf(err error) int {
	if err == nil {
		return 0
	}
	return wire.CodeOf(err)
}

// updates lists the sessionUpdate kinds of the notifications sent, each
// with the session id it names, so a test sees who was told what.
func updates(lines [][]byte) []string {
	var out []string
	for _, l := range lines {
		var n struct {
			Params struct {
				SessionID string `json:"sessionId"`
				Update    struct {
					Kind string `json:"sessionUpdate"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(l, &n) != nil {
			out = append(out, "unreadable: "+string(l))
			continue
		}
		out = append(out, strings.TrimSpace(n.Params.SessionID+" "+n.Params.Update.Kind))
	}
	return out
}

// awaitGaveUp waits until the rebuild has given up an attempt the agent
// died under.
func (h *harness) awaitGaveUp(ctx context.Context) {
	h.t.Helper()
	select {
	case <-h.gaveUp:
	case <-ctx.Done():
		h.t.Fatal("the rebuild never gave up the attempt the agent died under")
	}
}
