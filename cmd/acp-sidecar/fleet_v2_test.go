//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// v2Host is an editor that speaks ACP v2 to one host of a fleet: a sidecar
// on the fleet's store in front of a v2 fake agent of its own.
type v2Host struct {
	*ladderPeer
}

// startV2Host starts a host and initializes it in v2.
func startV2Host(t *testing.T, flags ...string) *v2Host {
	t.Helper()
	lp := startHost(t, []string{"-profile", "v2-current"}, flags...)
	resp := lp.call(`1`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"v2-editor","version":"1"},"capabilities":{}}}`)
	if !strings.Contains(string(resp), `"protocolVersion":2`) {
		t.Fatalf("initialize in v2: %s", clip(resp))
	}
	return &v2Host{lp}
}

// set sets option id to value, the v2 way.
func (h *v2Host) set(id, value string) {
	h.t.Helper()
	_, resp := h.request("session/set_config_option", map[string]any{"sessionId": h.sid, "configId": id, "type": "id", "value": value})
	mustSucceed(h.t, "set "+id, resp)
}

// turn sends a prompt, which is answered once accepted, and waits for the
// idle state_update that ends its turn; it returns the agent's text.
func (h *v2Host) turn(text string) string {
	h.t.Helper()
	from := len(h.lines())
	_, resp := h.request("session/prompt", map[string]any{"sessionId": h.sid, "prompt": []map[string]any{{"type": "text", "text": text}}})
	if !strings.Contains(string(resp), `"messageId"`) {
		h.t.Fatalf("prompt %q: %s, want it accepted with a messageId", text, clip(resp))
	}
	idle := h.await("the idle state_update of "+text, func(l []byte) bool {
		return strings.Contains(string(l), `"sessionUpdate":"state_update","state":"idle"`) && strings.Contains(string(l), `"sessionId":"`+h.sid+`"`)
	})
	if !strings.Contains(string(idle), `"stopReason":"end_turn"`) {
		h.t.Fatalf("turn %q ended %s, want end_turn", text, idle)
	}
	return chunkText(h.lines()[from:h.seen], h.sid)
}

// TestFleetFailoverV2 is TestFleetFailover with a v2 editor and v2 agents:
// host A dies mid-turn, and host B, asked to resume the session (v2 has no
// session/load), refuses while A's lease is live, naming A, then takes the
// session on with its config and kept turns, and marks A's running turn
// interrupted.
func TestFleetFailoverV2(t *testing.T) {
	t.Parallel()
	store := startPostgres(t)
	flags := []string{"--store", store, "--lease-ttl", "2s"}
	a := startV2Host(t, append(flags, "--host", "host-a")...)
	_, resp := a.request("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
	a.sid = sessionIDFrom(t, resp)
	a.set("model", fakeagent.ModelDeep)
	a.set("mode", "plan")
	for _, text := range []string{"alpha kept turn", "bravo kept turn"} {
		if r, ok := fakeagent.ParseReply(a.turn(text)); !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
			t.Fatalf("reply on host A = %+v (%v), want deep-3 / plan", r, ok)
		}
	}
	_, resp = a.request("session/prompt", map[string]any{"sessionId": a.sid, "prompt": []map[string]any{{"type": "text", "text": "hang"}}})
	mustSucceed(t, "the prompt that hangs", resp)
	// The running turn is kept under the id the editor knows its message
	// by before host A dies, and keeps it once it is marked interrupted.
	var accepted struct {
		Result struct {
			MessageID string `json:"messageId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp, &accepted); err != nil || accepted.Result.MessageID == "" {
		t.Fatalf("the prompt that hangs was accepted with %s, want a messageId", clip(resp))
	}
	userMessage := func() string {
		if turns := shownTurns(t, store, a.sid); len(turns) == 3 {
			return turns[2].UserMessageID
		}
		return ""
	}
	for userMessage() != accepted.Result.MessageID {
		if a.ctx.Err() != nil {
			t.Fatal("the running turn's user message id never reached the fleet's store")
		}
	}
	holder := dieMidTurn(t, a.ladderPeer, store)

	b := startV2Host(t, append(flags, "--host", "host-b")...)
	resp, refused := openUntilFree(t, b.ladderPeer, "session/resume", a.sid, holder)
	mustSucceed(t, "resume on host B", resp)
	t.Logf("host B's resume was refused %d times while host A's lease ran out", refused)
	b.sid = a.sid
	r, ok := fakeagent.ParseReply(b.turn("charlie on host b"))
	if !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
		t.Errorf("the first prompt on host B ran on %+v (%v), want deep-3 / plan", r, ok)
	}
	if ok && r.Blocks != 2 {
		t.Errorf("the first prompt on host B had %d blocks, want 2: the kept turns, then the prompt", r.Blocks)
	}
	checkFailedOver(t, store, a.sid)
	if turns := shownTurns(t, store, a.sid); len(turns) < 3 || turns[2].UserMessageID != accepted.Result.MessageID {
		t.Errorf("the interrupted turn in the fleet's store = %+v, want user message %s", turns, accepted.Result.MessageID)
	}
}
