//go:build linux

package e2e

import (
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

// TestClaudeCurrentCommandsAfterResume: see runCommandsAfterResume.
func TestClaudeCurrentCommandsAfterResume(t *testing.T) { runCommandsAfterResume(t, claudeNow) }

// TestClaudeCurrentCloseDelete: see runCloseDelete.
func TestClaudeCurrentCloseDelete(t *testing.T) { runCloseDelete(t, claudeNow) }

// TestClaudeCurrentNativeFork: see runNativeFork.
func TestClaudeCurrentNativeFork(t *testing.T) { runNativeFork(t, claudeNow) }
