//go:build linux

package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// systemMark is the system prompt a client asks claude-agent-acp to append
// in session/new's _meta, as a headless ACP CLI does; the mock LLM's log
// shows whether a turn ran with it.
const systemMark = "ACP-SIDECAR-E2E: answer in one line <and> keep it short & plain."

// TestClaudeCurrentCreationMeta: a client passes a system prompt to append
// in session/new's _meta (claude-agent-acp 0.101.0 reads
// _meta.systemPrompt). Every native session the sidecar makes for the
// session gets it again: the LLM is sent the client's system prompt on
// every turn, after /reset, after /rewind (the agent's own fork at a
// message), and after the agent's whole tree was killed.
func TestClaudeCurrentCreationMeta(t *testing.T) {
	t.Parallel()
	la := claudeNow
	argv := la.pkg.argv(t)
	mock, url := startMock(t, mockllm.Options{Reply: quietReply})
	s := &sidecarSession{t: t, mock: mock, argv: argv, env: la.env(t, url), dir: t.TempDir(), state: t.TempDir(), cwd: t.TempDir(), proto: 1}
	s.a = startSidecarState(t, s.argv, s.env, s.dir, s.state, s.flags()...)
	s.initialize(s.a)
	meta := json.RawMessage(`{"systemPrompt":{"append":` + string(mustJSON(t, systemMark)) + `}}`)
	res := step(t, s.a, "session/new", map[string]any{"cwd": s.cwd, "mcpServers": []any{}, "_meta": meta})
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res.Result, &sess); err != nil || sess.SessionID == "" {
		t.Fatalf("session/new result %s: %v", res.Result, err)
	}
	s.sid = sess.SessionID

	withSystem := func(step, text string) {
		t.Helper()
		r := s.turnRequest(text)
		if !strings.Contains(r.System(), systemMark) {
			t.Errorf("%s: the turn ran without the client's system prompt; its system prompt ends %q", step, tail(r.System(), 300))
		}
	}
	const (
		p1 = "Creation meta: the first turn."
		p2 = "Creation meta: after the reset."
		p3 = "Creation meta: to take back."
		p4 = "Creation meta: after the rewind."
		p5 = "Creation meta: after the crash."
	)
	s.prompt(p1)
	withSystem("the first turn", p1)
	s.prompt("/reset")
	s.prompt(p2)
	withSystem("after /reset", p2)
	s.prompt(p3)
	s.prompt("/rewind")
	s.prompt(p4)
	withSystem("after /rewind", p4)
	killTree(t, stepTimeout, s.agentPid())
	s.prompt(p5)
	withSystem("after the kill", p5)
	if st := s.status(); len(st.NativeHistory) < 3 {
		t.Errorf("native history %v: the reset and the rewind made no native sessions of their own", st.NativeHistory)
	}
}

// mustJSON is v as JSON, as encoding/json writes it without HTML escapes.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return []byte(strings.TrimSpace(b.String()))
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
