package fakeagent_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// responseID is the raw id of a response line, or nil for any other line.
func responseID(line []byte) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "" {
		return nil
	}
	return m.ID
}

// TestAnswerTwice: a listed method's request gets its real answer and, on
// the very next line, SecondAnswerLine with the same id; a method not
// listed is answered once.
func TestAnswerTwice(t *testing.T) {
	a := start(t, acpclient.Options{}, "-answer-twice", "session/prompt")
	s, ctx := a.session(t)
	a.reply(ctx, t, s.SessionId, "hello")
	if _, err := a.CallRaw(ctx, "_fake/echo", json.RawMessage(`{"after":1}`)); err != nil {
		t.Fatal(err)
	}
	lines := a.Lines()
	answers := map[string][][]byte{}
	var promptID json.RawMessage
	for i, l := range lines {
		id := responseID(l)
		if id == nil {
			continue
		}
		answers[string(id)] = append(answers[string(id)], l)
		if bytes.Contains(l, []byte(`"stopReason":"end_turn"`)) {
			promptID = id
			second := bytes.TrimSuffix(fakeagent.SecondAnswerLine(id), []byte("\n"))
			if i+1 >= len(lines) || !bytes.Equal(lines[i+1], second) {
				t.Errorf("the line after the prompt's answer is not the second answer %s; lines:\n%s", second, bytes.Join(lines, []byte("\n")))
			}
		}
	}
	if promptID == nil {
		t.Fatalf("no end_turn answer among:\n%s", bytes.Join(lines, []byte("\n")))
	}
	for id, got := range answers {
		want := 1
		if id == string(promptID) {
			want = 2
		}
		if len(got) != want {
			t.Errorf("request %s answered %d times, want %d: %q", id, len(got), want, got)
		}
	}

	t.Run("flag", func(t *testing.T) {
		for _, bad := range []string{"", "session/prompt,,x"} {
			a := start(t, acpclient.Options{}, "-answer-twice", bad)
			if code := a.exitCode(t); code != 2 {
				t.Errorf("-answer-twice %q: exit %d, want 2", bad, code)
			}
		}
	})
}
