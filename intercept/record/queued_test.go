package record

import (
	"testing"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// TestQueuedTurns holds the running turn and the ones queued behind it
// through what can happen to them: a prompt refused while it waits, the
// running turn's end, a prompt taken back unsent, and a fork's inherited
// turns moving them all back.
func TestQueuedTurns(t *testing.T) {
	s := &Session{}
	begin := func(req string) {
		s.beginTurn(req, state.Turn{Index: len(s.Turns) + 1, PromptText: req, Status: state.TurnRunning})
	}
	running := func() []string {
		var out []string
		if s.Turn != nil {
			out = append(out, s.Turn.PromptText)
		}
		for _, q := range s.queued {
			out = append(out, s.Turns[q.at].PromptText)
		}
		return out
	}
	want := func(step string, prompts ...string) {
		t.Helper()
		got := running()
		if len(got) != len(prompts) {
			t.Fatalf("%s: running %q, want %q", step, got, prompts)
		}
		for i := range got {
			if got[i] != prompts[i] {
				t.Fatalf("%s: running %q, want %q", step, got, prompts)
			}
		}
	}

	for _, req := range []string{"a", "b", "c", "d"} {
		begin(req) // each append may move Turns: the pointers must follow
	}
	want("four sent", "a", "b", "c", "d")
	if s.Turn != &s.Turns[0] {
		t.Fatal("the running turn does not point into Turns after the appends")
	}

	// c is refused while it waits: it ends, and a runs on.
	if ended, wasRunning := s.endTurn("c"); ended == nil || ended.PromptText != "c" || wasRunning {
		t.Fatalf("endTurn(c) = %v, %v; want c, not running", ended, wasRunning)
	}
	want("c refused", "a", "b", "d")

	// a's answer ends it, and b, the oldest waiting, runs.
	if ended, wasRunning := s.endTurn("a"); ended == nil || ended.PromptText != "a" || !wasRunning {
		t.Fatalf("endTurn(a) = %v, %v; want a, running", ended, wasRunning)
	}
	want("a answered", "b", "d")
	if s.turnOf("d") == nil || s.turnOf("d").PromptText != "d" || s.turnOf("a") != nil {
		t.Fatal("turnOf does not find the waiting turn by its prompt, or finds an ended one")
	}
	// An answer to a prompt whose turn ended already ends nothing.
	if ended, _ := s.endTurn("a"); ended != nil {
		t.Fatalf("a second answer to a ended %q", ended.PromptText)
	}
	want("a answered twice", "b", "d")

	// d never reached the agent: it is taken back; b is not the last turn.
	if dropped, wasRunning := s.DropLastTurn(); dropped == nil || dropped.PromptText != "d" || wasRunning {
		t.Fatalf("DropLastTurn = %v, %v; want d, not running", dropped, wasRunning)
	}
	want("d taken back", "b")
	if dropped, _ := s.DropLastTurn(); dropped != nil {
		t.Fatalf("DropLastTurn took %q, which is not the last turn", dropped.PromptText)
	}

	// A fork puts two inherited turns ahead: b and a new waiting e keep
	// their places among the moved turns.
	begin("e")
	moved := []state.Turn{{Index: 1, PromptText: "x"}, {Index: 2, PromptText: "y"}}
	for _, t := range s.Turns {
		t.Index += 2
		moved = append(moved, t)
	}
	s.MoveTurns(moved, 2)
	want("moved", "b", "e")
	if s.Turn != &s.Turns[3] {
		t.Fatal("the running turn does not point into the moved turns")
	}

	// The agent's idle (no request) ends the running turn.
	if ended, wasRunning := s.endTurn(""); ended == nil || ended.PromptText != "b" || !wasRunning {
		t.Fatalf(`endTurn("") = %v, %v; want b, running`, ended, wasRunning)
	}
	want("b idle", "e")

	// The agent dies with e running and f and g waiting, g never sent:
	// e and f end, and g stays the running turn, to be taken back.
	begin("f")
	begin("g")
	stopped := s.StopTurns(true)
	if len(stopped) != 2 || stopped[0].PromptText != "e" || stopped[1].PromptText != "f" {
		t.Fatalf("StopTurns(true) ended %v, want e and f", stopped)
	}
	want("g kept", "g")
	if s.turnOf("g") != s.Turn || s.turnOf("e") != nil {
		t.Fatal("the kept turn is not found by its own prompt, or an ended one still is")
	}
	if dropped, wasRunning := s.DropLastTurn(); dropped == nil || dropped.PromptText != "g" || !wasRunning {
		t.Fatalf("DropLastTurn = %v, %v; want g, running", dropped, wasRunning)
	}
	want("g taken back")
	if stopped := s.StopTurns(false); stopped != nil {
		t.Fatalf("StopTurns with nothing running ended %v", stopped)
	}
}
