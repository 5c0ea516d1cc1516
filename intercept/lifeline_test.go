package intercept

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// fakeLifelineOps is the lifeline's LifelineOps for its unit tests: it
// notes what it is asked, and answers as the test sets it. Recover settles
// the session in the ledger, as a rebuild that landed does.
type fakeLifelineOps struct {
	led *ledger.Ledger

	mu         sync.Mutex
	recovered  []string // the sessions Recover rebuilt
	takenBack  []string // the sessions TakeBack took a turn back from
	sentAgain  []string // the lines Again sent again
	confirmed  []string // the sessions Confirm asked about
	againErr   error
	lost       error // Lost's answer for every session
	fleet      bool
	confirmErr error
}

var _ LifelineOps = (*fakeLifelineOps)(nil)

func (o *fakeLifelineOps) Recover(_ context.Context, sid string) error {
	o.mu.Lock()
	o.recovered = append(o.recovered, sid)
	o.mu.Unlock()
	o.led.Update(func(f *ledger.Flight) { f.Settled(sid, f.Life()) })
	return nil
}

func (o *fakeLifelineOps) TakeBack(sid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.takenBack = append(o.takenBack, sid)
}

func (o *fakeLifelineOps) Again(_ context.Context, line []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sentAgain = append(o.sentAgain, string(line))
	return o.againErr
}

func (o *fakeLifelineOps) Lost(*proxy.Frame) error { return o.lost }

func (o *fakeLifelineOps) Fleet() bool { return o.fleet }

func (o *fakeLifelineOps) Confirm(_ context.Context, sid string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.confirmed = append(o.confirmed, sid)
	return o.confirmErr
}

// lifelineRig is a lifeline over a real ledger and life, with fake
// operations, and a rest of the chain that notes what went on.
type lifelineRig struct {
	ll   *Lifeline
	ops  *fakeLifelineOps
	led  *ledger.Ledger
	life *life.Life

	mu     sync.Mutex
	wentOn []string // the lines that went on to the rest of the chain
	marked []bool   // for each, whether the emulation would leave it alone (decided)
}

// newLifelineRig builds a lifeline whose requests wait at most timeout.
// Inside a synctest bubble, call it there: its signal and timers belong to
// the bubble.
func newLifelineRig(t *testing.T, timeout time.Duration) *lifelineRig {
	t.Helper()
	ready := life.NewSignal()
	led := ledger.New(ready.Fire)
	lf := life.New(ready)
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit) })
	ops := &fakeLifelineOps{led: led}
	watch := &rebuild.Watch{Life: lf, Ready: ready, Quit: quit, Timeout: timeout}
	r := &lifelineRig{ops: ops, led: led, life: lf}
	r.ll = NewLifeline(lf, led, watch, &ChunkGate{led: led}, ops, slog.New(slog.DiscardHandler))
	r.ll.goOnWith(func(ctx context.Context, _ proxy.Direction, raw []byte) proxy.Decision {
		env, _ := proxy.Scan(raw) // it scanned on its way in
		r.mu.Lock()
		defer r.mu.Unlock()
		r.wentOn = append(r.wentOn, string(raw))
		r.marked = append(r.marked, decided(ctx, env.ID))
		return proxy.Decision{Forward: [][]byte{raw}}
	})
	return r
}

// stale puts native session native behind sid and marks sid to be rebuilt,
// as the agent's death does.
func (r *lifelineRig) stale(sid, native string) {
	r.led.Update(func(f *ledger.Flight) {
		f.Remap(sid, native, f.Life())
		f.Sessions.MarkStale(sid)
	})
}

func (r *lifelineRig) intercept(t *testing.T, dir proxy.Direction, raw string) proxy.Verdict {
	t.Helper()
	f := scanFrame(t, dir, raw)
	if !r.ll.Claims(f.Dir, &f.Env) {
		return proxy.Verdict{}
	}
	v, err := r.ll.Intercept(t.Context(), f)
	if err != nil {
		t.Fatalf("Intercept(%s): %v", raw, err)
	}
	return v
}

const (
	promptS1 = `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}`
	cancelS1 = `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
)

// errorCode is the error code of the one answer a decision carries, 0 for
// none.
func errorCode(t *testing.T, lines [][]byte) int {
	t.Helper()
	if len(lines) != 1 {
		t.Fatalf("%d answers, want 1: %q", len(lines), lines)
	}
	return wire.ErrorCodeOf(wire.Member(lines[0], "error"))
}

// TestLifelinePassesWhenNothingWaits: with the agent up and no session
// stale or busy, a request goes on as it came, and nothing joins the
// waiting room.
func TestLifelinePassesWhenNothingWaits(t *testing.T) {
	r := newLifelineRig(t, time.Minute)
	for _, raw := range []string{
		promptS1,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"s1","modeId":"plan"}}`,
	} {
		if v := r.intercept(t, proxy.ClientToAgent, raw); v.Do != proxy.Pass {
			t.Errorf("%s: %v, want it passed", raw, v.Do)
		}
	}
	if r.led.Waiting() {
		t.Error("a request joined the waiting room while nothing waits")
	}
	if len(r.ops.confirmed) != 0 {
		t.Errorf("asked the fleet to confirm %v without a fleet", r.ops.confirmed)
	}
}

// TestLifelineRefuses: what can never go on is answered at once, with the
// code that says why: a dead agent, a session another sidecar of the fleet
// took, a closed session. A load or resume may take a lost lease back, and
// what only reads a closed session goes on.
func TestLifelineRefuses(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(r *lifelineRig)
		raw   string
		code  int // 0: passed
	}{
		{"dead agent", func(r *lifelineRig) { r.life.Dead("exit status 1") }, promptS1, proxy.CodeAgentGone},
		{"lease lost", func(r *lifelineRig) { r.ops.lost = wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: host b holds it") }, promptS1, proxy.CodeLeaseHeld},
		{"lease lost, load", func(r *lifelineRig) { r.ops.lost = wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: host b holds it") },
			`{"jsonrpc":"2.0","id":7,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[]}}`, 0},
		{"closed", func(r *lifelineRig) { r.led.Update(func(f *ledger.Flight) { f.Sessions.Close("s1") }) }, promptS1, proxy.CodeSessionClosed},
		{"closed, status", func(r *lifelineRig) { r.led.Update(func(f *ledger.Flight) { f.Sessions.Close("s1") }) },
			`{"jsonrpc":"2.0","id":7,"method":"_sidecar/status","params":{"sessionId":"s1"}}`, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newLifelineRig(t, time.Minute)
			tt.setup(r)
			v := r.intercept(t, proxy.ClientToAgent, tt.raw)
			switch {
			case tt.code == 0 && v.Do != proxy.Pass:
				t.Errorf("%v, want it passed", v.Do)
			case tt.code != 0 && v.Do != proxy.Answer:
				t.Errorf("%v, want it answered with %d", v.Do, tt.code)
			case tt.code != 0:
				if got := errorCode(t, [][]byte{v.Line}); got != tt.code {
					t.Errorf("answered %s, want code %d", v.Line, tt.code)
				}
			}
		})
	}
}

// TestLifelineLeavesTheEmulationItsRequests: while the agent restarts, the
// requests the emulation decides pass the lifeline, to wait in its room by
// the emulation's hand, without a rebuild of their session; every other
// request waits here.
func TestLifelineLeavesTheEmulationItsRequests(t *testing.T) {
	r := newLifelineRig(t, time.Minute)
	r.life.Gone("exit status 1")
	for _, tt := range []struct {
		raw  string
		want proxy.Action
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[]}}`, proxy.Pass},
		{`{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":"s1","cwd":"/"}}`, proxy.Pass},
		{`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`, proxy.Pass},
		{`{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":"s1"}}`, proxy.Pass},
		{`{"jsonrpc":"2.0","id":5,"method":"session/delete","params":{"sessionId":"s1"}}`, proxy.Pass},
		{`{"jsonrpc":"2.0","id":6,"method":"session/fork","params":{"sessionId":"s1","cwd":"/"}}`, proxy.Pass}, // the agent cannot fork
		{`{"jsonrpc":"2.0","id":7,"method":"session/close","params":{}}`, proxy.Hold},                          // no session: not the emulation's
		{promptS1, proxy.Hold},
	} {
		if v := r.intercept(t, proxy.ClientToAgent, tt.raw); v.Do != tt.want {
			t.Errorf("%s: %v, want %v", tt.raw, v.Do, tt.want)
		}
	}
	r.life.LearnCaps(life.Caps{Fork: true})
	if v := r.intercept(t, proxy.ClientToAgent, `{"jsonrpc":"2.0","id":8,"method":"session/fork","params":{"sessionId":"s1","cwd":"/"}}`); v.Do != proxy.Hold {
		t.Errorf("a fork on an agent that forks, while it restarts: %v, want it held", v.Do)
	}
}

// TestLifelineRebuildsAStaleSessionFirst: a request on a session whose
// native session died with the agent waits while its session is rebuilt,
// then goes on to the rest of the chain, marked as decided, so the
// emulation leaves it alone.
func TestLifelineRebuildsAStaleSessionFirst(t *testing.T) {
	r := newLifelineRig(t, time.Minute)
	r.stale("s1", "n1")
	v := r.intercept(t, proxy.ClientToAgent, promptS1)
	if v.Do != proxy.Hold {
		t.Fatalf("a prompt on a stale session: %v, want it held", v.Do)
	}
	d := v.Later(t.Context())
	if len(d.Answer) != 0 || len(d.Forward) != 1 || string(d.Forward[0]) != promptS1 {
		t.Fatalf("decision %q / %q, want the prompt forwarded as it came", d.Forward, d.Answer)
	}
	if !slices.Equal(r.ops.recovered, []string{"s1"}) {
		t.Errorf("recovered %v, want s1 once", r.ops.recovered)
	}
	if !slices.Equal(r.marked, []bool{true}) {
		t.Errorf("went on marked %v, want it marked as the lifeline's decision", r.marked)
	}
	if r.led.Waiting() {
		t.Error("the prompt is still in the waiting room")
	}
}

// TestLifelineWaitsForTheRestartedAgent: a request that comes while the
// agent restarts goes on once it is back, not before.
func TestLifelineWaitsForTheRestartedAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLifelineRig(t, time.Minute)
		r.life.Gone("exit status 1")
		v := r.intercept(t, proxy.ClientToAgent, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}`)
		if v.Do != proxy.Hold {
			t.Fatalf("a request while the agent restarts: %v, want it held", v.Do)
		}
		done := make(chan proxy.Decision, 1)
		go func() { done <- v.Later(context.Background()) }()
		synctest.Wait()
		select {
		case d := <-done:
			t.Fatalf("decided %q / %q before the agent was back", d.Forward, d.Answer)
		default:
		}
		r.life.Back()
		if d := <-done; len(d.Forward) != 1 || len(d.Answer) != 0 {
			t.Errorf("decision %q / %q, want the request forwarded", d.Forward, d.Answer)
		}
	})
}

// TestLifelineWaitEnds: a wait that ends without a ready session answers
// the request: past the hold timeout with an error that says what it
// waited for, a cancelled prompt as cancelled.
func TestLifelineWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLifelineRig(t, 5*time.Second)
		r.life.Gone("exit status 1")
		v := r.intercept(t, proxy.ClientToAgent, promptS1)
		start := time.Now()
		d := v.Later(context.Background())
		if got := errorCode(t, d.Answer); got != proxy.CodeAgentGone || !strings.Contains(string(d.Answer[0]), "waited 5s for the agent to restart") {
			t.Errorf("after the timeout: %s, want %d saying what it waited for", d.Answer[0], proxy.CodeAgentGone)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("waited %s, want the hold timeout", waited)
		}

		v = r.intercept(t, proxy.ClientToAgent, promptS1)
		done := make(chan proxy.Decision, 1)
		go func() { done <- v.Later(context.Background()) }()
		if c := r.intercept(t, proxy.ClientToAgent, cancelS1); c.Do != proxy.Drop {
			t.Errorf("the cancel of a waiting prompt: %v, want it kept from the agent", c.Do)
		}
		if d := <-done; len(d.Answer) != 1 || string(wire.Member(d.Answer[0], "result", "stopReason")) != `"cancelled"` {
			t.Errorf("the cancelled prompt's answer %q, want stopReason cancelled", d.Answer)
		}
	})
}

// TestLifelineConfirmsAFleetsPrompt: in a fleet a prompt goes on only once
// the database confirms this sidecar's lease, off the relay's path.
func TestLifelineConfirmsAFleetsPrompt(t *testing.T) {
	r := newLifelineRig(t, time.Minute)
	r.ops.fleet = true
	v := r.intercept(t, proxy.ClientToAgent, promptS1)
	if v.Do != proxy.Hold {
		t.Fatalf("a fleet's prompt: %v, want it held for the lease", v.Do)
	}
	if d := v.Later(t.Context()); len(d.Forward) != 1 {
		t.Errorf("confirmed: %q / %q, want the prompt forwarded", d.Forward, d.Answer)
	}
	r.ops.confirmErr = wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: host b took it")
	v = r.intercept(t, proxy.ClientToAgent, promptS1)
	if got := errorCode(t, v.Later(t.Context()).Answer); got != proxy.CodeLeaseHeld {
		t.Errorf("lease lost: code %d, want %d", got, proxy.CodeLeaseHeld)
	}
	if !slices.Equal(r.ops.confirmed, []string{"s1", "s1"}) {
		t.Errorf("confirmed %v, want s1 for each prompt", r.ops.confirmed)
	}
}

// TestLifelineUnsent: a prompt the dead agent never read is not in flight:
// its turn is taken back, and it waits for the next agent, not for the one
// whose death is not noticed yet.
func TestLifelineUnsent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLifelineRig(t, time.Minute)
		v := r.ll.Unsent(context.Background(), scanFrame(t, proxy.ClientToAgent, promptS1))
		if v.Do != proxy.Hold {
			t.Fatalf("an unsent prompt: %v, want it held", v.Do)
		}
		if !slices.Equal(r.ops.takenBack, []string{"s1"}) {
			t.Errorf("turns taken back %v, want s1's", r.ops.takenBack)
		}
		done := make(chan proxy.Decision, 1)
		go func() { done <- v.Later(context.Background()) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("went on to the agent that never read it")
		default:
		}
		r.life.Gone("exit status 1")
		r.life.Back()
		if d := <-done; len(d.Forward) != 1 {
			t.Errorf("decision %q / %q, want it forwarded to the next agent", d.Forward, d.Answer)
		}
	})
}

// TestLifelineSendsAgainWhatAResumeCouldNotServe: the agent's "not found"
// to the first prompt after a resume is dropped and the prompt sent again;
// any other error, or a prompt that cannot be sent again, reaches the
// client.
func TestLifelineSendsAgainWhatAResumeCouldNotServe(t *testing.T) {
	const notFound = `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"Internal error: thread not found"}}`
	const other = `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"Internal error: out of tokens"}}`
	for _, tt := range []struct {
		name, answer string
		againErr     error
		want         proxy.Action
		sent         int
	}{
		{"not found", notFound, nil, proxy.Drop, 1},
		{"another error", other, nil, proxy.Pass, 0},
		{"cannot send again", notFound, wire.Refuse(proxy.CodeAgentGone, "gone"), proxy.Pass, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newLifelineRig(t, time.Minute)
			r.ops.againErr = tt.againErr
			ctx := ledger.WithAnswered(t.Context(), ledger.Request{Method: wire.Prompt, Session: "s1", Probe: []byte(promptS1)})
			f := scanFrame(t, proxy.AgentToClient, tt.answer)
			v, err := r.ll.Intercept(ctx, f)
			if err != nil || v.Do != tt.want {
				t.Errorf("%v %v, want %v", v.Do, err, tt.want)
			}
			if len(r.ops.sentAgain) != tt.sent || tt.sent == 1 && r.ops.sentAgain[0] != promptS1 {
				t.Errorf("sent again %q, want the probe %d times", r.ops.sentAgain, tt.sent)
			}
		})
	}
}

// TestLifelineKeepsTheRebuildsOwnUpdates: while a native session's updates
// are kept back, the client sees only its news (the commands, the title).
func TestLifelineKeepsTheRebuildsOwnUpdates(t *testing.T) {
	r := newLifelineRig(t, time.Minute)
	r.led.Update(func(f *ledger.Flight) { f.Natives.Hush("n1", ledger.HushAll) })
	update := func(kind string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"n1","update":{"sessionUpdate":"` + kind + `"}}}`
	}
	for kind, want := range map[string]proxy.Action{
		"agent_message_chunk":       proxy.Drop,
		"tool_call":                 proxy.Drop,
		"available_commands_update": proxy.Pass,
		"session_info_update":       proxy.Pass,
	} {
		if v := r.intercept(t, proxy.AgentToClient, update(kind)); v.Do != want {
			t.Errorf("%s while a load replays: %v, want %v", kind, v.Do, want)
		}
	}
}
