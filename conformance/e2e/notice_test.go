//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// claudeAutoModeWarning is a phrase of the notice claude-agent-acp 0.101.0
// gives in the first turn of a native session when its requests go to an
// API that is not Anthropic's (here the mock): auto mode's classifier
// billing does not apply to it. The agent sends it as an
// agent_message_chunk with _meta.claudeCode.kind "informational" and no
// messageId (NOTES.md, "claude-agent-acp 0.101.0: ACP frames").
const claudeAutoModeWarning = "isn't eligible because your requests go through"

// TestClaudeCurrentNoticeNotHandedOver: the record keeps that warning as
// the turn's notice, not its answer, and the handoff a rewind arms takes
// the turn's prompt and answer to the LLM without it.
func TestClaudeCurrentNoticeNotHandedOver(t *testing.T) {
	argv := claudeCurrent.argv(t)
	mock, url := startMock(t, mockllm.Options{Reply: quietReply})
	s, _ := startSession(t, argv, claudeEnv(t, url), mock)
	first := s.prompt("My favourite colour is teal")
	warned := false
	for _, f := range first {
		warned = warned || strings.Contains(string(f.Raw), claudeAutoModeWarning) && strings.Contains(string(f.Raw), `"kind":"informational"`)
	}
	if !warned {
		t.Fatalf("claude sent no informational auto-mode warning in the first turn; the test's premise is gone (NOTES.md)")
	}
	s.prompt("My favourite animal is an otter")

	out, errOut, err := s.cli("show", s.sid, "--json")
	if err != nil {
		t.Fatalf("show: %v\n%s", err, errOut)
	}
	var rec struct {
		Turns []struct {
			Answer  string   `json:"answer"`
			Notices []string `json:"notices"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || len(rec.Turns) != 2 {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	if n := rec.Turns[0].Notices; len(n) != 1 || !strings.Contains(n[0], claudeAutoModeWarning) {
		t.Errorf("turn 1 notices %q, want the auto-mode warning", n)
	}
	for i, tu := range rec.Turns {
		if strings.Contains(tu.Answer, claudeAutoModeWarning) || !strings.HasPrefix(tu.Answer, "mock-llm: ") {
			t.Errorf("turn %d answer %q, want the mock's reply alone", i+1, tu.Answer)
		}
	}

	s.prompt("/rewind")
	const ask = "What did I say first?"
	s.prompt(ask)
	texts := strings.Join(s.turnRequest(ask).Texts(), "\n")
	if !strings.Contains(texts, "teal") || !strings.Contains(texts, "mock-llm: ") || strings.Contains(texts, "otter") {
		t.Errorf("the LLM request after the rewind lacks turn 1 or has turn 2:\n%s", clip(texts, strings.Index(texts, "teal")))
	}
	if strings.Contains(texts, claudeAutoModeWarning) {
		t.Errorf("the handoff took the notice to the LLM:\n%s", clip(texts, strings.Index(texts, claudeAutoModeWarning)))
	}
}

// TestClaudeCurrentCompactionHandoff: claude-agent-acp 0.101.0's /compact,
// for an editor that advertised clientCapabilities.session.compaction,
// sends compaction_update in_progress, then completed with the summary
// the LLM wrote (here the mock's reply), then completed again without one.
// The record keeps it with the turn it ran in, and the handoff a rewind
// arms leads with the summary and leaves out the turn before it.
func TestClaudeCurrentCompactionHandoff(t *testing.T) {
	argv := claudeCurrent.argv(t)
	mock, url := startMock(t, mockllm.Options{Reply: quietReply})
	s := &sidecarSession{t: t, mock: mock, argv: argv, env: claudeEnv(t, url), dir: t.TempDir(), state: t.TempDir(), cwd: t.TempDir()}
	s.a = startSidecarState(t, argv, s.env, s.dir, s.state, "--grace", "1s")
	step(t, s.a, "initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":      map[string]bool{"readTextFile": true, "writeTextFile": true},
			"session": map[string]any{"compaction": map[string]any{}},
		},
		"clientInfo": map[string]string{"name": "acp-sidecar-e2e", "version": "0"},
	})
	s.sid, _ = newSession(t, s.a, s.cwd)
	s.prompt("My favourite colour is teal")
	s.prompt("/compact")
	s.prompt("My favourite animal is an otter")

	out, errOut, err := s.cli("show", s.sid, "--json")
	if err != nil {
		t.Fatalf("show: %v\n%s", err, errOut)
	}
	var rec struct {
		Compaction *struct {
			Turn    int    `json:"turn"`
			Summary string `json:"summary"`
		} `json:"compaction"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Compaction == nil || rec.Compaction.Turn != 2 || !strings.HasPrefix(rec.Compaction.Summary, "mock-llm: ") {
		t.Fatalf("show --json compaction %+v (%v); want the mock's summary at turn 2\n%s", rec.Compaction, err, out)
	}

	s.prompt("/rewind") // takes the otter back: the summary and turn 2 are kept
	const ask = "What did I say first?"
	s.prompt(ask)
	texts := strings.Join(s.turnRequest(ask).Texts(), "\n")
	summary := strings.Index(texts, rec.Compaction.Summary)
	if summary < 0 || strings.Index(texts, "/compact") < summary {
		t.Errorf("the handoff does not lead with the summary before turn 2:\n%s", clip(texts, max(summary, 0)))
	}
	for _, not := range []string{"teal", "otter"} {
		if strings.Contains(texts, not) {
			t.Errorf("the LLM request after the rewind has %q:\n%s", not, clip(texts, strings.Index(texts, not)))
		}
	}
}

// codexUnlistedModel is a model codex 0.166 has no metadata for. A turn on
// it starts with codex's warning "Model metadata for `…` not found.
// Defaulting to fallback metadata …", which codex-acp 2.6.0 sends as a
// `notice` to a client that declares clientCapabilities.session.notices
// (and as answer text "Warning: …" to one that does not). The mock answers
// any model, so the turn runs.
const codexUnlistedModel = "gpt-mock-unlisted"

// TestCodexCurrentNoticeNotHandedOver: the record keeps codex's notice as
// the turn's notice, not its answer, and the handoff of a crash whose
// agent lost its own state takes the turn to the LLM without it. Wiping
// CODEX_HOME (all but config.toml) under the kill makes codex's resume and
// load fail, so the record is the rung the session comes back on. (With
// only the rollouts gone, codex-acp resumes and then fails the prompt,
// "thread not found": NOTES.md.)
//
// A client that declares no session.notices gets the same warning as
// message text, "Warning: …", with no messageId, and the record keeps it
// as the turn's notice all the same (life.Habits.WarnsInText).
func TestCodexCurrentNoticeNotHandedOver(t *testing.T) {
	for _, declared := range []bool{true, false} {
		name := "declares notices"
		if !declared {
			name = "declares none"
		}
		t.Run(name, func(t *testing.T) { codexNoticeNotHandedOver(t, declared) })
	}
}

func codexNoticeNotHandedOver(t *testing.T, declared bool) {
	argv := codexCurrent.argv(t)
	mock, url := startMock(t, mockllm.Options{Reply: quietReply})
	env := codexEnv(t, url)
	home := envValue(env, "CODEX_HOME")
	config := filepath.Join(home, "config.toml")
	b, err := os.ReadFile(config)
	if err == nil {
		err = os.WriteFile(config, append([]byte(fmt.Sprintf("model = %q\n", codexUnlistedModel)), b...), 0o600)
	}
	if err != nil {
		t.Fatalf("choose codex's model: %v", err)
	}
	s := &sidecarSession{t: t, mock: mock, argv: argv, env: env, dir: t.TempDir(), state: t.TempDir(), cwd: t.TempDir()}
	s.a = startSidecarState(t, argv, s.env, s.dir, s.state, "--grace", "1s")
	caps := map[string]any{"fs": map[string]bool{"readTextFile": true, "writeTextFile": true}}
	// As codex-acp sends the warning: a notice, or a chunk of text.
	sent := `"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Warning: `
	if declared {
		caps["session"] = map[string]any{"notices": map[string]any{}}
		sent = `"sessionUpdate":"notice"`
	}
	step(t, s.a, "initialize", map[string]any{
		"protocolVersion": 1, "clientCapabilities": caps,
		"clientInfo": map[string]string{"name": "acp-sidecar-e2e", "version": "0"},
	})
	s.sid, _ = newSession(t, s.a, s.cwd)
	const teal = "My favourite colour is teal"
	warning := "Model metadata for `" + codexUnlistedModel + "` not found"
	noticed := false
	for _, f := range s.prompt(teal) {
		noticed = noticed || strings.Contains(string(f.Raw), sent) && strings.Contains(string(f.Raw), warning)
	}
	if !noticed {
		t.Fatalf("codex sent no warning (%s) about the unlisted model in the first turn; the test's premise is gone (NOTES.md)", sent)
	}

	ents, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	killTree(t, stepTimeout, s.agentPid())
	for _, e := range ents {
		if e.Name() != "config.toml" {
			if err := os.RemoveAll(filepath.Join(home, e.Name())); err != nil {
				t.Fatalf("wipe codex's state: %v", err)
			}
		}
	}
	const ask = "What did I say first?"
	s.prompt(ask)
	texts := strings.Join(s.turnRequest(ask).Texts(), "\n")
	if n := strings.Count(texts, handoffHeader); n != 1 || !strings.Contains(texts, teal) || !strings.Contains(texts, "mock-llm: ") {
		t.Fatalf("the LLM request after the crash has the handoff %d times, or lacks turn 1:\n%s", n, clip(texts, strings.Index(texts, handoffHeader)))
	}
	if strings.Contains(texts, warning) {
		t.Errorf("the handoff took the notice to the LLM:\n%s", clip(texts, strings.Index(texts, warning)))
	}

	rec := s.show()
	if len(rec.Turns) != 2 {
		t.Fatalf("recorded %d turns, want 2", len(rec.Turns))
	}
	first := rec.Turns[0]
	if len(first.Notices) != 1 || !strings.Contains(first.Notices[0], warning) {
		t.Errorf("turn 1 notices %q, want codex's warning", first.Notices)
	}
	if strings.Contains(first.Answer, warning) || !strings.HasPrefix(first.Answer, "mock-llm: ") {
		t.Errorf("turn 1 answer %q, want the mock's reply alone", first.Answer)
	}
	if h := rec.Handoff; h == nil || h.Kept != 1 || h.NativeSessionID != rec.NativeSessionID {
		t.Errorf("record handoff %+v, want 1 kept turn delivered to native session %s", h, rec.NativeSessionID)
	}
}
