package intercept_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
	acp "github.com/coder/acp-go-sdk"
)

func TestRollbackRefusals(t *testing.T) {
	r := newRig(t, intercept.Config{})
	ctx := t.Context()
	sid := configure(t, r)
	reply(t, r, sid, "one")
	calls := len(r.calls(t))
	for _, params := range []map[string]any{
		{"sessionId": sid, "keepTurns": 2},
		{"sessionId": sid, "keepTurns": -1},
		{"sessionId": "nope", "keepTurns": 0},
		{"sessionId": sid},
	} {
		if res, err := r.client.CallRaw(ctx, wire.ExtRollback, params); err == nil {
			t.Errorf("rollback %v answered %s; want an error", params, res)
		}
	}
	if _, text, _ := r.client.Prompt(ctx, sid, "/rewind 5"); !strings.Contains(text, "cannot rewind 5") {
		t.Errorf("/rewind 5 answered %q", text)
	}
	if n := len(r.calls(t)); n != calls {
		t.Errorf("refused rollbacks made %d agent calls", n-calls)
	}
	turns, _ := r.store.Turns(ctx, string(sid))
	if len(turns) != 1 || turns[0].Status != state.TurnCompleted {
		t.Errorf("turns changed: %+v", turns)
	}
}

func TestForkInheritsTurnsUpToTheForkPoint(t *testing.T) {
	r := newRig(t, intercept.Config{})
	ctx := t.Context()
	sid := configure(t, r)
	for _, p := range []string{"alpha one", "beta two", "gamma three"} {
		reply(t, r, sid, p)
	}
	res, err := r.client.CallRaw(ctx, wire.ExtFork, map[string]any{"sessionId": sid, "atTurn": 2})
	if err != nil {
		t.Fatal(err)
	}
	var fork struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(res, &fork)
	got := reply(t, r, sessionID(fork.SessionID), "echo: where are we?")
	seen := strings.Join(got.Echo, "\n")
	if !strings.Contains(seen, "alpha one") || !strings.Contains(seen, "beta two") || strings.Contains(seen, "gamma three") {
		t.Errorf("the fork's first prompt carried %q; want turns 1-2 of the parent only", seen)
	}
	if got.Model != "deep-3" || got.Mode != "plan" {
		t.Errorf("fork config %+v; want the parent's", got)
	}
	// A fork of the fork inherits the chain.
	res, err = r.client.CallRaw(ctx, wire.ExtFork, map[string]any{"sessionId": fork.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	var fork2 struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(res, &fork2)
	got = reply(t, r, sessionID(fork2.SessionID), "echo: and here?")
	seen = strings.Join(got.Echo, "\n")
	for _, want := range []string{"alpha one", "beta two", "where are we?"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the second fork lacks %q: %q", want, seen)
		}
	}
	rec, err := r.store.Session(ctx, fork2.SessionID)
	if err != nil || rec.Lineage == nil || rec.Lineage.ParentID != fork.SessionID {
		t.Errorf("lineage %+v, %v", rec, err)
	}
}

func sessionID(s string) acp.SessionId { return acp.SessionId(s) }

// TestRewindFarBackReadsTheStore: a long session keeps only its newest turns'
// text in memory; a rewind to an early turn still hands over that turn's
// text, read from the store.
func TestRewindFarBackReadsTheStore(t *testing.T) {
	r := newRig(t, intercept.Config{HandoffBudget: 64 << 10})
	ctx := t.Context()
	sid := configure(t, r)
	const n = 24
	for i := 1; i <= n; i++ {
		reply(t, r, sid, fmt.Sprintf("marker-%02d %s", i, strings.Repeat("w", 8<<10)))
	}
	if _, text, err := r.client.Prompt(ctx, sid, fmt.Sprintf("/rewind %d", n-2)); err != nil || !strings.Contains(text, "2 turn(s) kept") {
		t.Fatalf("/rewind answered %q, %v", text, err)
	}
	got := reply(t, r, sid, "echo: what did I say?")
	seen := strings.Join(got.Echo, "\n")
	for _, want := range []string{"marker-01", "marker-02"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the handoff lacks %s", want)
		}
	}
	if strings.Contains(seen, "marker-03") {
		t.Errorf("the handoff has a rewound turn")
	}
	turns, _ := r.store.Turns(ctx, string(sid))
	if len(turns[1].PromptText) < 8<<10 {
		t.Errorf("the store lost turn 2's text: %d bytes", len(turns[1].PromptText))
	}
}
