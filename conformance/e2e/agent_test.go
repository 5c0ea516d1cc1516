//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// A pkg is one npm package scripts/e2e-setup.sh installs: the folder under
// .cache/e2e it goes into and its entry point there.
type pkg struct {
	name  string // for messages: "@zed-industries/claude-agent-acp 0.23.1"
	setup string // the e2e-setup.sh argument that prints its entry point
	entry string // relative to the repository root
}

var (
	// claudeLegacy is claude-agent-acp before the move to the
	// @agentclientprotocol scope, which the older tests here were written
	// against (NOTES.md, "claude-agent-acp 0.23.1").
	claudeLegacy = pkg{
		name:  "@zed-industries/claude-agent-acp 0.23.1",
		setup: "claude-0.23",
		entry: ".cache/e2e/claude-agent-acp/node_modules/@zed-industries/claude-agent-acp/dist/index.js",
	}
	// claudeCurrent and codexCurrent are what editors install today
	// (agents.md, "The packages editors install today").
	claudeCurrent = pkg{
		name:  "@agentclientprotocol/claude-agent-acp 0.101.0",
		setup: "claude",
		entry: ".cache/e2e/agentclientprotocol-claude-agent-acp/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js",
	}
	codexCurrent = pkg{
		name:  "@agentclientprotocol/codex-acp 2.6.0",
		setup: "codex",
		entry: ".cache/e2e/agentclientprotocol-codex-acp/node_modules/@agentclientprotocol/codex-acp/dist/index.js",
	}
)

// argv returns the command line that runs p with node. If p is not
// installed the test is skipped with the command that installs it, or fails
// when CI=true, where a skip would hide a broken setup.
func (p pkg) argv(t testing.TB) []string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("find repository root: %v", err)
	}
	entry := filepath.Join(root, filepath.FromSlash(p.entry))
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(entry); err != nil || nodeErr != nil {
		testbin.Missing(t, fmt.Sprintf("%s is not installed (%v); run: %s %s", p.name,
			errors.Join(err, nodeErr), filepath.Join(root, "scripts", "e2e-setup.sh"), p.setup))
	}
	return []string{node, entry}
}

// startMock starts a mock LLM that lives until the test ends. opts.Logf
// defaults to t.Logf.
func startMock(t testing.TB, opts mockllm.Options) (*mockllm.Server, string) {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	mock, url, err := mockllm.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start mock LLM: %v", err)
	}
	t.Cleanup(func() {
		if err := mock.Close(); err != nil {
			t.Errorf("close mock LLM: %v", err)
		}
	})
	return mock, url
}

// ClaudeAgent returns the command line and environment that run the installed
// claude-agent-acp 0.23.1 against a fresh mock LLM that lives until the test
// ends. See ClaudeAgentMock for the details.
func ClaudeAgent(t testing.TB) (argv []string, env []string) {
	t.Helper()
	argv, env, _ = ClaudeAgentMock(t)
	return argv, env
}

// ClaudeAgentMock is ClaudeAgent that also returns the mock, so a test can
// read what the agent sent to the LLM.
func ClaudeAgentMock(t testing.TB) (argv []string, env []string, mock *mockllm.Server) {
	t.Helper()
	argv = claudeLegacy.argv(t)
	mock, url := startMock(t, mockllm.Options{})
	return argv, claudeEnv(t, url), mock
}

// claudeEnv is the environment that runs claude-agent-acp, old or current,
// against the mock at url: the test's own minus anything that could steer
// the agent elsewhere (see cleanEnv), plus what agents.md "Running
// claude-agent-acp offline" lists: the mock's URL, a dummy key, no
// telemetry, error reporting, updates or nonessential traffic, IS_SANDBOX=1
// when running as root, and a fresh HOME, because sessions are stored under
// $HOME/.claude/projects and must not leak between tests.
func claudeEnv(t testing.TB, url string) []string {
	env := append(cleanEnv(os.Environ()),
		"HOME="+t.TempDir(),
		"ANTHROPIC_BASE_URL="+url,
		"ANTHROPIC_API_KEY=test",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		// The mock is on loopback; make sure no inherited proxy setting
		// routes it elsewhere.
		"NO_PROXY=127.0.0.1,localhost",
	)
	if os.Geteuid() == 0 {
		// Without it, claude run as root exits during session/new, which
		// fails with -32603 "Query closed before response received"
		// (agents.md, "Processes").
		env = append(env, "IS_SANDBOX=1")
	}
	return env
}

// mockKeyEnv names the variable codex reads its API key from: the env_key
// of the mock's model provider in config.toml.
const mockKeyEnv = "MOCKLLM_API_KEY"

// codexEnv is the environment that runs codex-acp against the mock at url:
// the test's own minus what cleanEnv drops, a fresh HOME and a fresh
// CODEX_HOME whose config.toml makes a custom model provider on the mock's
// Responses API the default (agents.md: codex reads CODEX_HOME/config.toml;
// a run in a used home starts in the mode the last one chose).
func codexEnv(t testing.TB, url string) []string {
	t.Helper()
	codexHome := t.TempDir()
	config := fmt.Sprintf(`# Written by the e2e tests: every turn goes to conformance/mockllm.
model_provider = "mockllm"

[model_providers.mockllm]
name = "mockllm"
base_url = %q
env_key = %q
wire_api = "responses"
`, url+"/v1", mockKeyEnv)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatalf("write codex config: %v", err)
	}
	return append(cleanEnv(os.Environ()),
		"HOME="+t.TempDir(),
		"CODEX_HOME="+codexHome,
		mockKeyEnv+"=test",
		"NO_PROXY=127.0.0.1,localhost",
	)
}

// cleanEnv drops the variables that would point an agent at a real API,
// a real account or a proxy, or share state between tests.
func cleanEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.HasPrefix(u, "ANTHROPIC_"), strings.HasPrefix(u, "CLAUDE_"),
			strings.HasPrefix(u, "OPENAI_"), strings.HasPrefix(u, "CODEX_"),
			u == "HTTP_PROXY", u == "HTTPS_PROXY", u == "ALL_PROXY", u == "NO_PROXY",
			u == "HOME", u == "XDG_CONFIG_HOME", u == "IS_SANDBOX", u == mockKeyEnv:
			continue
		}
		out = append(out, kv)
	}
	return out
}

// repoRoot is the directory holding this module's go.mod.
func repoRoot() (string, error) { return testbin.RepoRoot() }
