package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadLLMLogPartialLine reads a log the mock is still writing: the
// line without its '\n' yet is not a request, nor a failure.
func TestReadLLMLogPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llm.jsonl")
	whole := `{"method":"POST","path":"/v1/messages","model":"claude-sonnet-4-6"}` + "\n"
	if err := os.WriteFile(path, []byte(whole+`{"method":"POST","path":"/v1/mes`), 0o600); err != nil {
		t.Fatal(err)
	}
	reqs, err := readLLMLog(path)
	if err != nil {
		t.Fatalf("a log with its last line half written: %v", err)
	}
	if len(reqs) != 1 || reqs[0].Model != "claude-sonnet-4-6" {
		t.Fatalf("got %+v, want the one whole line's request", reqs)
	}
}

// TestForkHoldsJudgesTheTurnsRequest: what a native rewind's fork holds is
// read from the LLM request for the prompt after it, not from a side
// request that quotes the prompt. codex-acp 2.6.0 asks for a title from a
// fork's first prompt alone, logged after the turn's own request in 2 of
// 13 runs beside a loaded CI, and the check took the good fork for empty.
func TestForkHoldsJudgesTheTurnsRequest(t *testing.T) {
	const (
		kept  = "rewind-native-1 heron t1"
		gone  = "rewind-native-2 pike t1"
		after = "Say OK. (rewind-native-3 after t1)"
	)
	message := func(role, text string) string {
		return `{"type":"message","role":"` + role + `","content":[{"type":"input_text","text":"` + text + `"}]}`
	}
	request := func(items ...string) string {
		input := ""
		for i, it := range items {
			if i > 0 {
				input += ","
			}
			input += it
		}
		return `{"method":"POST","path":"/v1/responses","model":"gpt-5","body":{"model":"gpt-5","input":[` + input + `]}}` + "\n"
	}
	turn := request(message("user", "Say OK. ("+kept+")"), message("assistant", "OK"), message("user", after))
	empty := request(message("user", after))
	title := request(message("user", `Generate a title. User's first message:\n`+after))
	for _, tc := range []struct {
		name, log, err string
	}{
		{"turn-then-title", turn + title, ""},
		{"title-then-turn", title + turn, ""},
		{"empty-fork", empty + title, "holds the kept turn: false"},
		{"title-only", title, "has no request for the prompt after the rewind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "llm.jsonl")
			if err := os.WriteFile(path, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			how, err := forkHolds(path, "", after, kept, gone, "no tool ran")
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("forkHolds: %v, want the fork judged by the turn's request", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("forkHolds = %q, %v; want an error with %q", how, err, tc.err)
			}
		})
	}
}
