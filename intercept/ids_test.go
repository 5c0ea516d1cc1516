package intercept

import (
	"context"
	"slices"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// TestEarlyFramesAlwaysReleased: frames for a session being created are
// held, and every one is released when the last creation ends, whether it
// succeeded (under the client's id) or failed (unchanged). A frame held and
// never released would stall every later frame to the client. A released
// frame meets the stages after the ids stage, as it would have unheld.
func TestEarlyFramesAlwaysReleased(t *testing.T) {
	led := ledger.New(nil)
	m := &idMapper{led: led, gate: &ChunkGate{led: led}}
	var after []string
	NewChain(nil, m, sawAfter{&after}).WithAnswers(led, true)
	frame := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"new-1","update":{}}}`
	other := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"stray","update":{}}}`
	intercept := func(raw string) proxy.Verdict {
		t.Helper()
		f := scanFrame(t, proxy.AgentToClient, raw)
		if !m.Claims(f.Dir, &f.Env) {
			return proxy.Verdict{}
		}
		v, err := m.Intercept(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	led.Update(func(f *ledger.Flight) { f.Natives.BeginCreating() })
	var held []proxy.Verdict
	for _, raw := range []string{frame, other} {
		v := intercept(raw)
		if v.Do != proxy.Hold {
			t.Fatalf("a frame for an unknown session was not held during a creation: %s", raw)
		}
		held = append(held, v)
	}
	led.Update(func(f *ledger.Flight) {
		f.Remap("client-1", "new-1", 0)
		f.Natives.EndCreating()
	})
	// Each Later returns at once now: the creation has ended. One that
	// waited would hang here until the test's deadline.
	want := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"client-1","update":{}}}`,
		other,
	}
	for i, v := range held {
		d := v.Later(context.Background())
		if len(d.Forward) != 1 || string(d.Forward[0]) != want[i] || len(d.Answer) != 0 {
			t.Errorf("released %q, want %s", d.Forward, want[i])
		}
	}
	if !slices.Equal(after, want) {
		t.Errorf("the stage after the ids stage saw %q, want %q", after, want)
	}
	// After the last creation, nothing is held any more.
	if v := intercept(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"late","update":{}}}`); v.Do == proxy.Hold {
		t.Error("a frame was held with no creation in flight")
	}
}

// TestSettledKeepsALaterDeath: a rebuild that landed clears its session's
// stale mark only while the agent it rebuilt on lives. The kill loop found
// the race: /reset settled, the agent died and marked the session stale,
// and the reset's clear undid the mark, so the next prompt went to the new
// agent under a native id that died with the old one.
func TestSettledKeepsALaterDeath(t *testing.T) {
	r := New(Config{Store: nil})
	gen := r.life.Gen()
	r.led.Update(func(f *ledger.Flight) { f.Sessions.MarkStale("s1") })
	r.led.Update(func(f *ledger.Flight) { f.Settled("s1", gen) })
	if r.led.IsStale("s1") {
		t.Fatal("a rebuild on a living agent left the session stale")
	}
	// The agent dies: the ledger hears of the new life as it marks.
	r.led.Update(func(f *ledger.Flight) { f.Remap("s1", "n1", gen); f.AgentGone(gen + 1) })
	r.led.Update(func(f *ledger.Flight) { f.Settled("s1", gen) })
	if !r.led.IsStale("s1") {
		t.Error("a rebuild from before the agent's death cleared the mark the death set")
	}
}

// sawAfter is a stage that notes every frame it is offered.
type sawAfter struct{ saw *[]string }

func (s sawAfter) Claims(proxy.Direction, *proxy.Envelope) bool { return true }

func (s sawAfter) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	*s.saw = append(*s.saw, string(f.Raw))
	return proxy.Verdict{}, nil
}
