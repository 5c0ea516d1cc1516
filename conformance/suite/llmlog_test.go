package suite

import (
	"os"
	"path/filepath"
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
