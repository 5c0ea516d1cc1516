//go:build linux

package e2e

import (
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// codexNow is codex-acp as editors install it today, over codex 0.166 on
// the mock's Responses API. Its session starts on gpt-6.1-sol in mode agent
// at reasoning_effort low (NOTES.md); gpt-6-luna offers reasoning_effort
// (low to max), and the test chooses high on it, in read-only mode.
var codexNow = liveAgent{
	nativeRewind: true,
	pkg:          codexCurrent,
	env:          codexEnv,
	model:        "gpt-6-luna",
	wireModel:    "gpt-6-luna",
	mode:         "read-only",
	// The mode is codex's sandbox preset, which its developer message
	// spells out.
	modeSeen: func(r mockllm.Request) bool { return strings.Contains(r.System(), "`sandbox_mode` is `read-only`") },
	effort:   "high",
}

// TestCodexLifecycle: see runLifecycle.
func TestCodexLifecycle(t *testing.T) { runLifecycle(t, codexNow) }

// TestCodexLifecycleV2: runLifecycle with a client of ACP v2.
func TestCodexLifecycleV2(t *testing.T) { runLifecycle(t, inV2(codexNow)) }

// The lifecycle through `acp-sidecar serve` in v2, the client on the ACP
// SDK's own WebSocket transport.
func TestCodexLifecycleOverServe(t *testing.T) {
	runLifecycle(t, overServe(inV2(codexNow), "ws"))
}

// TestCodexCommandsAfterResume: see runCommandsAfterResume.
func TestCodexCommandsAfterResume(t *testing.T) { runCommandsAfterResume(t, codexNow) }

// TestCodexNativeFork: see runNativeFork.
func TestCodexNativeFork(t *testing.T) { runNativeFork(t, codexNow) }
