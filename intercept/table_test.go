package intercept

import (
	"context"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// holdRecorder is a Sidecar whose holds only count their releases.
type holdRecorder struct {
	held, released int
	lines          [][]byte
}

func (h *holdRecorder) Call(context.Context, string, any, any) error { return nil }
func (h *holdRecorder) Send(proxy.Direction, []byte) error           { return nil }
func (h *holdRecorder) Hold(proxy.Direction) func(lines ...[]byte) {
	h.held++
	return func(lines ...[]byte) {
		h.released++
		h.lines = append(h.lines, lines...)
	}
}

// TestEarlyFramesAlwaysReleased: frames for a session being created are
// held, and every one is released when the last creation ends, whether it
// succeeded (under the client's id) or failed (unchanged). A frame held and
// never released would stall every later frame to the client.
func TestEarlyFramesAlwaysReleased(t *testing.T) {
	tb := newTable(newSignal())
	h := &holdRecorder{}
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"new-1","update":{}}}`)
	other := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"stray","update":{}}}`)

	tb.beginCreating()
	if !tb.holdEarly("new-1", frame, h) || !tb.holdEarly("stray", other, h) {
		t.Fatal("frames for unknown sessions were not held during a creation")
	}
	tb.remap("client-1", "new-1")
	tb.endCreating()
	if h.released != h.held || h.held != 2 {
		t.Fatalf("held %d, released %d; want every held frame released", h.held, h.released)
	}
	want := map[string]bool{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"client-1","update":{}}}`: true,
		string(other): true,
	}
	for _, l := range h.lines {
		if !want[string(l)] {
			t.Errorf("released %s", l)
		}
	}
	// After the last creation, nothing is held any more.
	if tb.holdEarly("late", other, h) {
		t.Error("a frame was held with no creation in flight")
	}
}

// TestSettledKeepsALaterDeath: a rebuild that landed clears its session's
// stale mark only while the agent it rebuilt on lives. The kill loop found
// the race: /reset settled, the agent died and marked the session stale,
// and the reset's clear undid the mark, so the next prompt went to the new
// agent under a native id that died with the old one.
func TestSettledKeepsALaterDeath(t *testing.T) {
	r := NewRecorder(RecorderConfig{Store: nil})
	gen := r.life.gen.Load()
	r.t.markStale("s1")
	r.settled("s1", gen)
	if r.t.isStale("s1") {
		t.Fatal("a rebuild on a living agent left the session stale")
	}
	r.life.gen.Add(1) // AgentGone counts the new life before it marks
	r.t.markStale("s1")
	r.settled("s1", gen)
	if !r.t.isStale("s1") {
		t.Error("a rebuild from before the agent's death cleared the mark the death set")
	}
}
