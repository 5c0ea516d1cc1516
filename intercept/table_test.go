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
