//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// TestClaudeCurrentQueuedPrompts: claude-agent-acp 0.101.0 queues a prompt
// that comes while a turn of its session runs (it advertises
// _meta.claudeCode.promptQueueing). The second prompt is sent while the
// first turn's LLM request is held at the mock, so it reaches the agent
// mid-turn; then the turn is let go. Each prompt is answered end_turn,
// and the record keeps each as its own turn, with its own answer: the
// first turn's end does not end the second's record, and neither holds
// the other's text.
func TestClaudeCurrentQueuedPrompts(t *testing.T) {
	t.Parallel()
	la := claudeNow
	argv := la.pkg.argv(t)
	mock, url := startMock(t, mockllm.Options{Reply: func(r mockllm.Request) string {
		return "mock-llm answers: " + strings.TrimSpace(strings.ReplaceAll(r.LastUserText(), mockllm.HoldMarker, ""))
	}})
	s, _ := startSessionIn(t, 1, argv, la.env(t, url), mock)
	const (
		first  = "Queue: the first turn."
		second = "Queue: the second turn."
	)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range mock.Requests() {
				t.Logf("the mock saw %s %s last=%.80q", r.Method, r.Path, r.LastUserText())
			}
		}
	})
	send := func(text string) func(ctx context.Context) (frame, error) {
		t.Helper()
		wait, err := s.a.begin("session/prompt", map[string]any{
			"sessionId": s.sid, "prompt": []map[string]string{{"type": "text", "text": text}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return wait
	}
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	waitFirst := send(first + " " + mockllm.HoldMarker)
	if _, err := mock.WaitRequest(ctx, func(r mockllm.Request) bool { return r.LastUserText() == first+" "+mockllm.HoldMarker }); err != nil {
		t.Fatalf("the first turn never reached the LLM: %v", err)
	}
	// The first turn waits at the mock; the second prompt is on its way
	// to the agent before the first turn is let go.
	waitSecond := send(second)
	mock.Release()
	for _, c := range []struct {
		name string
		wait func(ctx context.Context) (frame, error)
	}{{"first", waitFirst}, {"second", waitSecond}} {
		f, err := c.wait(ctx)
		if err != nil {
			t.Fatalf("the %s prompt: %v\nstderr:\n%s", c.name, err, s.a.stderr.String())
		}
		checkEndTurn(t, c.name, f)
	}
	s.closeClient()
	turns := s.show().Turns
	if len(turns) != 2 {
		t.Fatalf("the record has %d turns, want 2: %+v", len(turns), turns)
	}
	for i, want := range []string{first, second} {
		tu := turns[i]
		if !strings.Contains(tu.Prompt, want) || tu.Status != "completed" {
			t.Errorf("turn %d: prompt %q status %s, want %q completed", i+1, tu.Prompt, tu.Status, want)
		}
		if !strings.Contains(tu.Answer, "mock-llm answers: "+want) {
			t.Errorf("turn %d: answer %q, want the LLM's answer to %q", i+1, tu.Answer, want)
		}
		other := []string{second, first}[i]
		if strings.Contains(tu.Answer, "answers: "+other) {
			t.Errorf("turn %d: answer %q holds the other turn's answer", i+1, tu.Answer)
		}
	}
}
