//go:build linux

package e2e

import (
	"encoding/json"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// claudeNow is claude-agent-acp as editors install it today. Its session
// starts on model default (Opus) in mode auto at effort default (NOTES.md);
// the test chooses other values of all three.
var claudeNow = liveAgent{
	nativeRewind: true,
	pkg:          claudeCurrent,
	env:          claudeEnv,
	model:        "sonnet",
	wireModel:    "claude-sonnet-5-5",
	mode:         "plan",
	// claude tells the LLM about plan mode in a system-role message of the
	// conversation, not in the system prompt (NOTES.md).
	modeSeen: func(r mockllm.Request) bool { return countIn(r.Texts(), "Plan mode is active.") > 0 },
	effort:   "high",
}

// TestClaudeCurrentLifecycle: see runLifecycle.
func TestClaudeCurrentLifecycle(t *testing.T) { runLifecycle(t, claudeNow) }

// TestClaudeCurrentLifecycleV2: runLifecycle with a client of ACP v2,
// through a sidecar that lets it speak v2 (--max-protocol 2).
func TestClaudeCurrentLifecycleV2(t *testing.T) { runLifecycle(t, inV2(claudeNow)) }

// The same lifecycle through `acp-sidecar serve`, the client on the ACP
// SDK's own HTTP transport: nothing stdio promises is weaker over the
// network (a reopen is a new connection to the same server).
func TestClaudeCurrentLifecycleOverServe(t *testing.T) {
	runLifecycle(t, overServe(claudeNow, "http"))
}

// TestClaudeCurrentCommandsAfterResume: see runCommandsAfterResume.
func TestClaudeCurrentCommandsAfterResume(t *testing.T) { runCommandsAfterResume(t, claudeNow) }

// TestClaudeCurrentCloseDelete: see runCloseDelete.
func TestClaudeCurrentCloseDelete(t *testing.T) { runCloseDelete(t, claudeNow) }

// TestClaudeCurrentNativeFork: see runNativeFork.
func TestClaudeCurrentNativeFork(t *testing.T) { runNativeFork(t, claudeNow) }

// TestClaudeCurrentV2ClientGetsV1: claude-agent-acp 0.101.0 answers a
// client that offers ACP v2 in v2 shapes. Through a sidecar kept to v1
// (--max-protocol 1) the client's offer reaches it as v1: the result says
// protocolVersion 1, in v1 shapes (agentCapabilities, not capabilities),
// and a prompt is answered with its stop reason, as v1 has it.
func TestClaudeCurrentV2ClientGetsV1(t *testing.T) {
	t.Parallel()
	mock, url := startMock(t, mockllm.Options{Reply: quietReply})
	a := startSidecarState(t, claudeNow.pkg.argv(t), claudeNow.env(t, url), t.TempDir(), t.TempDir(), "--grace", "1s", "--max-protocol", "1")
	res := step(t, a, "initialize", map[string]any{
		"protocolVersion": 2, "clientCapabilities": map[string]any{},
		"clientInfo": map[string]string{"name": "acp-sidecar-e2e-v2", "version": "0"},
	})
	var init struct {
		ProtocolVersion int             `json:"protocolVersion"`
		AgentCaps       json.RawMessage `json:"agentCapabilities"`
		Caps            json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res.Result, &init); err != nil || init.ProtocolVersion != 1 || init.AgentCaps == nil || init.Caps != nil {
		t.Fatalf("initialize offered v2 through the sidecar: %s (%v), want protocolVersion 1 in v1 shapes", res.Result, err)
	}
	s := &sidecarSession{t: t, a: a, mock: mock, cwd: t.TempDir()}
	s.sid, _ = newSession(t, a, s.cwd)
	s.prompt("A v1 turn for a client that offered v2.")
}
