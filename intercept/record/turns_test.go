package record

import (
	"context"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// TestBetweenTurns: what the agent sends for a session between its turns
// is the background work of the turn before, written with that turn whole;
// the same frames while the session is being opened are the open's replay,
// history the record has, and change nothing.
func TestBetweenTurns(t *testing.T) {
	ctx := context.Background()
	store := state.NewMemory()
	led := ledger.New(func() {})
	r := New(Config{Store: store}, led, life.New(life.NewSignal()))
	ended := state.Turn{Index: 1, Status: state.TurnCompleted, Prompt: []byte(`[{"type":"text","text":"go"}]`), PromptText: "go", Answer: "done."}
	if err := store.PutSession(ctx, &state.Session{ClientID: "fz-s", NativeID: "fz-s"}); err != nil {
		t.Fatal(err)
	}
	if err := store.PutTurn(ctx, "fz-s", &ended); err != nil {
		t.Fatal(err)
	}
	light := ended
	Lighten(&light)
	s := &Session{Rec: state.Session{ClientID: "fz-s", NativeID: "fz-s"}, Turns: []state.Turn{light}}
	r.sessions["fz-s"] = s
	// The session is open here, as its session/new made it (record.go).
	led.Update(func(f *ledger.Flight) { f.Remap("fz-s", "fz-s", f.Life()) })
	chunk := updateFrame(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":" And the check passed."}}`)
	tool := updateFrame(`{"sessionUpdate":"tool_call","toolCallId":"bg-1","title":"Background check","status":"completed"}`)
	feed := func() {
		t.Helper()
		r.text.TakeChunk(chunkFrame(t, chunk))
		if v, err := r.Intercept(ctx, chunkFrame(t, tool)); err != nil || v.Do != 0 {
			t.Fatalf("the tool call's verdict %+v, %v: want it to pass", v, err)
		}
		for len(r.events) > 0 {
			r.apply(ctx, <-r.events)
		}
	}

	// Opening: a load of the session is in flight; its replay is history.
	led.Update(func(f *ledger.Flight) { f.Requests.Note("load-1", "session/load", "fz-s") })
	feed()
	if got, err := store.Turns(ctx, "fz-s"); err != nil || got[0].Answer != "done." || len(got[0].ToolCalls) != 0 {
		t.Fatalf("the turn after a load's replay: %+v, %v; want it as it was", got, err)
	}
	led.Update(func(f *ledger.Flight) { f.Requests.Respond("load-1") })

	// Between turns: the turn before's background work.
	feed()
	got, err := store.Turns(ctx, "fz-s")
	if err != nil || len(got) != 1 {
		t.Fatalf("turns %+v, %v", got, err)
	}
	tu := got[0]
	if tu.Answer != "done. And the check passed." || len(tu.ToolCalls) != 1 || tu.ToolCalls[0].Title != "Background check" || string(tu.Prompt) != `[{"type":"text","text":"go"}]` {
		t.Errorf("the turn with its background work: %+v; want the answer and tool call added, its prompt kept", tu)
	}
	if !strings.Contains(s.Turns[0].Answer, "check passed") {
		t.Errorf("the turn in memory: answer %q, want the background text too", s.Turns[0].Answer)
	}
}
