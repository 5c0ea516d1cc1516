package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/state"
)

func turn(i int, status state.TurnStatus, prompt, answer string) state.Turn {
	return state.Turn{Index: i, Status: status, PromptText: prompt, Answer: answer}
}

func TestKeptLeavesOutRolledBackAndCancelled(t *testing.T) {
	turns := []state.Turn{
		turn(1, state.TurnCompleted, "teal", "ok"),
		turn(2, state.TurnRolledBack, "otter", "ok"),
		turn(3, state.TurnCancelled, "never mind", ""),
		turn(4, state.TurnFailed, "boom", ""),
		turn(5, state.TurnRunning, "cut short", "half"),
	}
	h := BuildHandoff(Kept(turns), 0)
	for _, want := range []string{"teal", "boom", "cut short", "interrupted", "<turn 1 user>", "<turn 3 assistant>", "context only"} {
		if !strings.Contains(h.Text, want) {
			t.Errorf("handoff lacks %q:\n%s", want, h.Text)
		}
	}
	for _, not := range []string{"otter", "never mind"} {
		if strings.Contains(h.Text, not) {
			t.Errorf("handoff has %q:\n%s", not, h.Text)
		}
	}
	if h.Kept != 3 {
		t.Errorf("kept %d, want 3", h.Kept)
	}
	if strings.Index(h.Text, "teal") > strings.Index(h.Text, "boom") {
		t.Errorf("items are not oldest first")
	}
}

func TestHandoffBudget(t *testing.T) {
	var turns []state.Turn
	for i := 1; i <= 200; i++ {
		turns = append(turns, turn(i, state.TurnCompleted, fmt.Sprintf("question %d %s", i, strings.Repeat("q", 500)), fmt.Sprintf("answer %d %s", i, strings.Repeat("a", 500))))
	}
	for _, budget := range []int{2 << 10, DefaultBudget, MaxBudget, 1 << 20} {
		h := BuildHandoff(turns, budget)
		if len(h.Text) > min(budget, MaxBudget) {
			t.Errorf("budget %d: text of %d bytes", budget, len(h.Text))
		}
		for _, want := range []string{"question 200 ", "answer 200 ", "question 1 "} {
			if !strings.Contains(h.Text, want) {
				t.Errorf("budget %d: lacks %q", budget, want)
			}
		}
		if h.Omitted == 0 || !strings.Contains(h.Text, fmt.Sprintf("%d earlier items were left out", h.Omitted)) {
			t.Errorf("budget %d: omitted %d not said", budget, h.Omitted)
		}
	}
}

func TestNoTurnsNoHandoff(t *testing.T) {
	if h := BuildHandoff(nil, 0); h.Text != "" {
		t.Errorf("handoff of nothing: %q", h.Text)
	}
}

func TestToolCallsAreOneLine(t *testing.T) {
	tr := turn(1, state.TurnCompleted, "read it", "done")
	tr.ToolCalls = []state.ToolCall{{ID: "t1", Title: "Read\nfile.go", Status: "completed"}}
	h := BuildHandoff([]state.Turn{tr}, 0)
	if !strings.Contains(h.Text, "[tool call] Read file.go (completed)") {
		t.Errorf("tool call line missing:\n%s", h.Text)
	}
}

// FuzzHandoff: never over budget, never a rolled-back turn.
func FuzzHandoff(f *testing.F) {
	f.Add(3, 500, 2048, uint64(0b0101))
	f.Fuzz(func(t *testing.T, n, size, budget int, rolled uint64) {
		n, size = n%60, size%4000
		if n < 0 || size < 0 {
			return
		}
		var turns []state.Turn
		for i := 0; i < n; i++ {
			st := state.TurnCompleted
			if rolled&(1<<(i%64)) != 0 {
				st = state.TurnRolledBack
			}
			turns = append(turns, turn(i+1, st, fmt.Sprintf("P%dP %s", i+1, strings.Repeat("x", size)), "A"))
		}
		h := BuildHandoff(Kept(turns), budget)
		limit := budget
		if limit <= 0 {
			limit = DefaultBudget
		}
		if len(h.Text) > min(limit, MaxBudget) && h.Items > 0 {
			t.Fatalf("text %d over budget %d", len(h.Text), limit)
		}
		for i, tr := range turns {
			if tr.Status == state.TurnRolledBack && strings.Contains(h.Text, fmt.Sprintf("P%dP", i+1)) {
				t.Fatalf("rolled-back turn %d in the handoff", i+1)
			}
		}
	})
}

// A turn the agent began itself (ACP v2) is handed over as the agent's
// alone, with what it asked the user: no user message leads it, and the
// user's latest request is still the latest user item kept first.
func TestAgentTurnsAreTheAgents(t *testing.T) {
	turns := []state.Turn{
		turn(1, state.TurnCompleted, "watch the build", "I will."),
		{Index: 2, Status: state.TurnCompleted, Origin: state.OriginAgent, Answer: "The build finished: 3 tests fail.", Asked: []string{"Run go test ./..."}},
		turn(3, state.TurnCompleted, "fix them", "Fixed."),
		{Index: 4, Status: state.TurnCompleted, Origin: state.OriginAgent, Answer: "The nightly job is green."},
	}
	h := BuildHandoff(Kept(turns), 0)
	for _, want := range []string{
		"<turn 2 assistant, begun by the agent itself>\nThe build finished: 3 tests fail.\n[asked the user] Run go test ./...\n</turn 2 assistant>\n",
		"<turn 4 assistant, begun by the agent itself>\nThe nightly job is green.\n</turn 4 assistant>\n",
		"<turn 3 user>\nfix them\n</turn 3 user>",
	} {
		if !strings.Contains(h.Text, want) {
			t.Errorf("handoff lacks %q:\n%s", want, h.Text)
		}
	}
	for _, not := range []string{"<turn 2 user>", "<turn 4 user>"} {
		if strings.Contains(h.Text, not) {
			t.Errorf("handoff has %q, a user message the agent's own turn never had:\n%s", not, h.Text)
		}
	}
	// With room for three items only, the three kept first are the
	// latest user message, the latest answer and the first user message.
	small := BuildHandoff(Kept(turns), len(h.Text)-len("<turn 2 assistant, begun by the agent itself>\nThe build finished: 3 tests fail.\n[asked the user] Run go test ./...\n</turn 2 assistant>\n")-len("<turn 3 assistant>\nFixed.\n</turn 3 assistant>\n")+len(fmt.Sprintf(omittedNote, len(turns)*2)))
	for _, want := range []string{"fix them", "nightly job", "watch the build"} {
		if !strings.Contains(small.Text, want) {
			t.Errorf("a small handoff lacks %q:\n%s", want, small.Text)
		}
	}
}
