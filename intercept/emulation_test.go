package intercept

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// fakeRoom is the emulation's WaitingRoom for its unit tests: every session
// must wait or none, and a held request is decided as soon as its Later
// runs.
type fakeRoom struct {
	wait bool
	held []string // the sessions of the requests held
}

var _ WaitingRoom = (*fakeRoom)(nil)

func (r *fakeRoom) MustWait(string) bool { return r.wait }

func (r *fakeRoom) Hold(f *proxy.Frame, sid string, decide Decider) proxy.Verdict {
	r.held = append(r.held, sid)
	q := Held{Method: string(f.Env.Method), Session: sid, ID: bytes.Clone(f.Env.ID), Raw: bytes.Clone(f.Raw)}
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision { return decide(ctx, q) }}
}

// fakeEmulationOps is the emulation's EmulationOps for its unit tests: it
// notes each call, and answers as the test sets it.
type fakeEmulationOps struct {
	mu        sync.Mutex
	calls     []string
	reopened  []byte // Reopen's result
	reopenErr error
	err       error // CloseHere's, DeleteHere's and ForkHere's
}

var _ EmulationOps = (*fakeEmulationOps)(nil)

func (o *fakeEmulationOps) note(call string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call)
}

func (o *fakeEmulationOps) Reopen(_ context.Context, sid, method string, _ []byte) ([]byte, error) {
	o.note("reopen " + sid + " " + method)
	return o.reopened, o.reopenErr
}

func (o *fakeEmulationOps) List(_ context.Context, id, _ []byte) []byte {
	o.note("list")
	return wire.Response(id, []byte(`{"sessions":[]}`))
}

func (o *fakeEmulationOps) CloseHere(_ context.Context, sid string) error {
	o.note("close " + sid)
	return o.err
}

func (o *fakeEmulationOps) DeleteHere(_ context.Context, sid string) error {
	o.note("delete " + sid)
	return o.err
}

func (o *fakeEmulationOps) ForkHere(_ context.Context, parent string) (string, []byte, error) {
	o.note("fork " + parent)
	if o.err != nil {
		return "", nil, o.err
	}
	return "c2", []byte(`{"sessionId":"c2"}`), nil
}

// emulationRig is an emulation over a real ledger and life, with a fake
// room and fake operations, and a rest of the chain that notes what the
// agent would be sent.
type emulationRig struct {
	em     *emulation
	room   *fakeRoom
	ops    *fakeEmulationOps
	led    *ledger.Ledger
	wentOn []string
}

func newEmulationRig(caps life.Caps) *emulationRig {
	led := ledger.New(nil)
	lf := life.New(life.NewSignal())
	lf.LearnCaps(caps)
	r := &emulationRig{room: &fakeRoom{}, ops: &fakeEmulationOps{}, led: led}
	r.em = NewEmulation(r.room, r.ops, led, lf).(*emulation)
	r.em.goOnWith(func(_ context.Context, _ proxy.Direction, raw []byte) proxy.Decision {
		r.wentOn = append(r.wentOn, string(raw))
		return proxy.Decision{Forward: [][]byte{raw}}
	})
	return r
}

// run offers raw to the emulation, and decides it when it is held.
func (r *emulationRig) run(ctx context.Context, t *testing.T, raw string) (proxy.Verdict, proxy.Decision) {
	t.Helper()
	f := scanFrame(t, proxy.ClientToAgent, raw)
	if !r.em.Claims(f.Dir, &f.Env) {
		return proxy.Verdict{}, proxy.Decision{}
	}
	v, err := r.em.Intercept(ctx, f)
	if err != nil {
		t.Fatalf("Intercept(%s): %v", raw, err)
	}
	if v.Do != proxy.Hold {
		return v, proxy.Decision{}
	}
	return v, v.Later(ctx)
}

const (
	closeS1  = `{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"s1"}}`
	deleteS1 = `{"jsonrpc":"2.0","id":3,"method":"session/delete","params":{"sessionId":"s1"}}`
	forkS1   = `{"jsonrpc":"2.0","id":3,"method":"session/fork","params":{"sessionId":"s1","cwd":"/"}}`
	loadS1   = `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[]}}`
	resumeS1 = `{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"s1","cwd":"/"}}`
	listAll  = `{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`
)

// TestEmulationPassesWhatTheAgentDoes: what the agent can do itself, with
// nothing to wait for, goes on untouched, and so does every request that
// is not the emulation's.
func TestEmulationPassesWhatTheAgentDoes(t *testing.T) {
	all := life.Caps{Protocol: 1, Load: true, Resume: true, List: true, Fork: true, Close: true, Delete: true}
	for _, tt := range []struct {
		name string
		caps life.Caps
		raw  string
	}{
		{"close", all, closeS1},
		{"delete", all, deleteS1},
		{"fork", all, forkS1},
		{"list", all, listAll},
		{"load of no session", life.Caps{}, `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"cwd":"/"}}`},
		{"v2 load", life.Caps{Protocol: 2}, loadS1},
		{"close of no session", life.Caps{}, `{"jsonrpc":"2.0","id":3,"method":"session/close","params":{}}`},
		{"prompt", life.Caps{}, promptS1},
		{"new", life.Caps{}, `{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newEmulationRig(tt.caps)
			if v, _ := r.run(t.Context(), t, tt.raw); v.Do != proxy.Pass {
				t.Errorf("%v, want it passed", v.Do)
			}
			if len(r.ops.calls) != 0 || len(r.room.held) != 0 {
				t.Errorf("called %v, held %v; want neither", r.ops.calls, r.room.held)
			}
		})
	}
}

// TestEmulationAnswersWhatTheAgentCannot: each request the emulation takes
// waits in the room, and is then answered from the record, or goes on to
// the agent when the agent can take it after all.
func TestEmulationAnswersWhatTheAgentCannot(t *testing.T) {
	none := life.Caps{Protocol: 1}
	for _, tt := range []struct {
		name   string
		caps   life.Caps
		wait   bool // the session must wait (the agent restarts)
		stale  bool // s1 died with the agent
		opsErr error
		raw    string
		call   string // what the emulation asked of the operations
		result string // the answer's result, "" when the request went on
		code   int    // the answer's error code
	}{
		{name: "close", caps: none, raw: closeS1, call: "close s1", result: `{}`},
		{name: "close fails", caps: none, raw: closeS1, opsErr: wire.Refuse(proxy.CodeInvalidParams, "no"), call: "close s1", code: proxy.CodeInvalidParams},
		{name: "close after a wait", caps: life.Caps{Close: true}, wait: true, raw: closeS1},
		{name: "close of a dead session", caps: life.Caps{Close: true}, wait: true, stale: true, raw: closeS1, call: "close s1", result: `{}`},
		{name: "delete", caps: none, raw: deleteS1, call: "delete s1", result: `{}`},
		{name: "delete after a wait", caps: life.Caps{Delete: true}, wait: true, stale: true, raw: deleteS1},
		{name: "fork", caps: none, raw: forkS1, call: "fork s1", result: `{"sessionId":"c2"}`},
		{name: "fork fails", caps: none, raw: forkS1, opsErr: wire.Refuse(proxy.CodeInvalidParams, "no"), call: "fork s1", code: proxy.CodeInvalidParams},
		{name: "list", caps: none, raw: listAll, call: "list", result: `{"sessions":[]}`},
		{name: "list after a wait", caps: life.Caps{List: true}, wait: true, raw: listAll},
		{name: "load", caps: none, raw: loadS1, call: "reopen s1 session/load", result: `{"configOptions":[]}`},
		{name: "resume", caps: life.Caps{Resume: true}, raw: resumeS1, call: "reopen s1 session/resume", result: `{"configOptions":[]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newEmulationRig(tt.caps)
			r.room.wait, r.ops.err, r.ops.reopened = tt.wait, tt.opsErr, []byte(`{"configOptions":[]}`)
			if tt.stale {
				r.led.Update(func(f *ledger.Flight) {
					f.Remap("s1", "n1", f.Life())
					f.Sessions.MarkStale("s1")
				})
			}
			v, d := r.run(t.Context(), t, tt.raw)
			if v.Do != proxy.Hold || !slices.Equal(r.room.held, []string{wire.SessionIDOf(scanFrame(t, proxy.ClientToAgent, tt.raw))}) {
				t.Fatalf("%v, held %v: want it held for its session", v.Do, r.room.held)
			}
			if want := []string{tt.call}; tt.call == "" && len(r.ops.calls) != 0 || tt.call != "" && !slices.Equal(r.ops.calls, want) {
				t.Errorf("called %v, want %q", r.ops.calls, tt.call)
			}
			if tt.result == "" && tt.code == 0 {
				if len(d.Answer) != 0 || !slices.Equal(r.wentOn, []string{tt.raw}) {
					t.Errorf("answered %q, went on %q: want it sent on to the agent", d.Answer, r.wentOn)
				}
				return
			}
			if len(d.Answer) == 0 || len(r.wentOn) != 0 {
				t.Fatalf("answered %q, went on %q: want it answered here", d.Answer, r.wentOn)
			}
			if got := wire.ErrorCodeOf(wire.Member(d.Answer[0], "error")); got != tt.code {
				t.Errorf("answer %s: code %d, want %d", d.Answer[0], got, tt.code)
			}
			if tt.result != "" && string(wire.Member(d.Answer[0], "result")) != tt.result {
				t.Errorf("answer %s, want result %s", d.Answer[0], tt.result)
			}
		})
	}
}

// TestEmulationSendsItsCommandsAfterAnOpen: a fork or a load the sidecar
// answers is an open, and the sidecar's command list follows it, unless
// the agent sent its own during the reopen.
func TestEmulationSendsItsCommandsAfterAnOpen(t *testing.T) {
	r := newEmulationRig(life.Caps{Protocol: 1})
	r.ops.reopened = []byte(`{}`)
	_, d := r.run(t.Context(), t, forkS1)
	if len(d.Answer) != 2 || wire.SessionIDOf(scanFrame(t, proxy.AgentToClient, string(d.Answer[1]))) != "c2" {
		t.Fatalf("a fork's answer %q: want the result, then the commands for the fork", d.Answer)
	}
	r.led.Update(func(f *ledger.Flight) {
		f.Remap("s1", "n1", f.Life())
		f.Natives.SawCommands("n1")
	})
	if _, d := r.run(t.Context(), t, loadS1); len(d.Answer) != 1 {
		t.Errorf("a load after the agent's own command list: %q, want the result alone", d.Answer)
	}
}

// TestEmulationGivesTheAgentWhatTheRecordDoesNotKnow: a load the record
// cannot answer goes to the agent: a session it does not know, or one live
// here on an agent that loads; an error reading it is the answer.
func TestEmulationGivesTheAgentWhatTheRecordDoesNotKnow(t *testing.T) {
	for _, tt := range []struct {
		name     string
		reopened []byte
		err      error
		toAgent  bool
	}{
		{"unknown", nil, state.ErrNotFound, true},
		{"live here", nil, nil, true},
		{"unreadable", nil, wire.Refuse(proxy.CodeInternalError, "cannot read"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newEmulationRig(life.Caps{Protocol: 1, Load: true})
			r.ops.reopened, r.ops.reopenErr = tt.reopened, tt.err
			_, d := r.run(t.Context(), t, loadS1)
			if got := len(r.wentOn) == 1 && len(d.Answer) == 0; got != tt.toAgent {
				t.Errorf("went on %q, answered %q; to the agent: %v, want %v", r.wentOn, d.Answer, got, tt.toAgent)
			}
		})
	}
}

// TestEmulationLeavesWhatTheLifelineDecided: a request the lifeline held
// and let go on passes the emulation as it is, though the emulation would
// have taken it had it come from the client.
func TestEmulationLeavesWhatTheLifelineDecided(t *testing.T) {
	r := newEmulationRig(life.Caps{Protocol: 1})
	f := scanFrame(t, proxy.ClientToAgent, loadS1)
	if v, _ := r.run(wentOn(t.Context(), f.Env.ID), t, loadS1); v.Do != proxy.Pass {
		t.Errorf("a load the lifeline let go on: %v, want it passed", v.Do)
	}
	if v, _ := r.run(wentOn(t.Context(), []byte("99")), t, loadS1); v.Do != proxy.Hold {
		t.Errorf("a load while another request goes on: %v, want it held", v.Do)
	}
}

// TestLifelineThenEmulation runs the two stages as the chain does, over a
// real waiting room: while the agent restarts, a load of a stale session
// waits once, is not rebuilt by the crash ladder but reopened, and a
// prompt on it is rebuilt first and never meets the emulation; a load the
// dead agent never read goes to the next agent as it is.
func TestLifelineThenEmulation(t *testing.T) {
	lr := newLifelineRig(t, time.Minute)
	ops := &fakeEmulationOps{reopened: []byte(`{}`)}
	em := NewEmulation(lr.ll, ops, lr.led, lr.life)
	var tail []string
	last := &recordingInterceptor{name: "tail", asked: &tail}
	c := NewChain(nil, lr.ll, em, last).WithAnswers(lr.led, true)
	lr.stale("s1", "n1")
	lr.life.Gone("exit status 1")

	load := c.Frame(t.Context(), scanFrame(t, proxy.ClientToAgent, loadS1))
	prompt := c.Frame(t.Context(), scanFrame(t, proxy.ClientToAgent, promptS1))
	if load.Do != proxy.Hold || prompt.Do != proxy.Hold {
		t.Fatalf("load %v, prompt %v: want both held", load.Do, prompt.Do)
	}
	lr.life.Back()
	if d := load.Later(t.Context()); len(d.Answer) != 2 {
		t.Errorf("the load's decision %q / %q: want the reopen's answer and the commands", d.Forward, d.Answer)
	}
	if d := prompt.Later(t.Context()); len(d.Forward) != 1 {
		t.Errorf("the prompt's decision %q / %q: want it forwarded", d.Forward, d.Answer)
	}
	if !slices.Equal(ops.calls, []string{"reopen s1 session/load"}) || !slices.Equal(lr.ops.recovered, []string{"s1"}) {
		t.Errorf("emulation ops %v, recovered %v: want the load reopened and the session recovered once, for the prompt", ops.calls, lr.ops.recovered)
	}

	// Unsent: the lifeline decided it, so the emulation lets it by.
	ops.calls = nil
	unsent := c.Unsent(t.Context(), scanFrame(t, proxy.ClientToAgent, `{"jsonrpc":"2.0","id":9,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[]}}`))
	lr.life.Gone("exit status 1")
	lr.life.Back()
	// Held again inside its own wait, it would wait for itself for ever.
	decision := make(chan proxy.Decision, 1)
	go func() { decision <- unsent.Later(t.Context()) }()
	select {
	case d := <-decision:
		if len(d.Forward) != 1 || len(ops.calls) != 0 {
			t.Errorf("an unsent load: %q / %q, emulation ops %v: want it forwarded as it is", d.Forward, d.Answer, ops.calls)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an unsent load was held again behind itself")
	}
	if len(tail) != 2 {
		t.Errorf("the stage after the emulation saw %v, want the prompt and the unsent load", tail)
	}
}
