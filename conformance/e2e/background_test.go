//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// TestClaudeCurrentBackgroundWork: claude-agent-acp 0.101.0 ends a turn at
// its result while a command it started in the background still runs;
// when the command ends, the agent tells the LLM, and what it says of it
// reaches the client after the turn's answer. In v1 the record keeps that
// under the turn it came from: the turn's answer has it, and the next
// turn's record has none of it. The command waits on a fifo the test writes to
// once the turn is over, so the order is the test's, not the clock's.
func TestClaudeCurrentBackgroundWork(t *testing.T) { runBackgroundWork(t, 1) }

// TestClaudeCurrentBackgroundWorkV2: the same in ACP v2, where the agent
// reports the work it does on the command's end as foreground work it
// began itself (state_update running with no prompt, then idle): the
// record keeps it as a turn of the agent's own, between the client's two.
func TestClaudeCurrentBackgroundWorkV2(t *testing.T) { runBackgroundWork(t, 2) }

func runBackgroundWork(t *testing.T, proto int) {
	t.Parallel()
	la := claudeNow
	argv := la.pkg.argv(t)
	mock, url := startMock(t, mockllm.Options{Reply: func(r mockllm.Request) string {
		if strings.Contains(r.LastUserText(), "task-notification") {
			return "mock-llm:heard-of-the-background-command"
		}
		return fmt.Sprintf("mock-llm answers: %.40s", r.LastUserText())
	}})
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range mock.TurnRequests() {
				t.Logf("the mock saw last=%.300q", r.LastUserText())
			}
		}
	})
	s, res := startSessionIn(t, proto, argv, la.env(t, url), mock)
	s.setOption(optionID(t, optionsOf(t, res), "mode"), "bypassPermissions")
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	first := "Background: start it. " + mockllm.BackgroundMarker + "cat " + fifo + "; echo background-done"
	frames := s.prompt(first)
	t.Logf("the first turn: %d frames", len(frames))
	after := s.a.frameCount()

	// The turn is over; the command ends now, and the agent hears of it.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "go")
	f.Close()
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	if _, err := s.a.waitFrame(ctx, after, func(f frame) bool {
		return f.Method == "session/update" && strings.Contains(string(f.Params), "heard-of-the-background-command")
	}); err != nil {
		t.Fatalf("no word of the background command reached the client after the turn: %v", err)
	}
	s.prompt("Background: the next turn.")
	s.closeClient()
	rec := s.show()
	turns := rec.Turns
	next := 1 // where the client's second turn lies
	if proto >= 2 {
		// The agent's own turn lies between the client's two.
		if len(turns) != 3 {
			t.Fatalf("the record has %d turns, want 3 (the client's, the agent's own, the client's): %+v", len(turns), turns)
		}
		own := turns[1]
		if own.Origin != "agent" || own.Prompt != "" || own.Status != "completed" || !strings.Contains(own.Answer, "heard-of-the-background-command") {
			t.Errorf("turn 2: %+v, want the agent's own turn, completed, with what it said of the command", own)
		}
		next = 2
	} else {
		if len(turns) != 2 {
			t.Fatalf("the record has %d turns, want 2: %+v", len(turns), turns)
		}
		if !strings.Contains(turns[0].Answer, "heard-of-the-background-command") {
			t.Errorf("the first turn's answer %q lacks its background work", turns[0].Answer)
		}
	}
	if strings.Contains(turns[next].Answer, "heard-of-the-background-command") || !strings.Contains(turns[next].Answer, "the next turn") {
		t.Errorf("the next turn's answer %q, want its own alone", turns[next].Answer)
	}
}
