package e2e

import (
	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"

	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// claudeAgentEntry is where scripts/e2e-setup.sh installs claude-agent-acp,
// relative to the repository root.
const claudeAgentEntry = ".cache/e2e/claude-agent-acp/node_modules/@zed-industries/claude-agent-acp/dist/index.js"

// ClaudeAgent returns the command line and environment that run the installed
// claude-agent-acp against a fresh mock LLM that lives until the test ends.
// See ClaudeAgentMock for the details.
func ClaudeAgent(t testing.TB) (argv []string, env []string) {
	t.Helper()
	argv, env, _ = ClaudeAgentMock(t)
	return argv, env
}

// ClaudeAgentMock is ClaudeAgent that also returns the mock, so a test can
// read what the agent sent to the LLM.
//
// The environment is the test's own minus anything that could steer the
// agent elsewhere (ANTHROPIC_*, CLAUDE_*, proxies, HOME), plus what
// agents.md "Running claude-agent-acp offline" lists: the mock's URL, a
// dummy key, no telemetry, error reporting, updates or nonessential
// traffic, IS_SANDBOX=1 when running as root, and a fresh HOME, because
// sessions are stored under $HOME/.claude/projects and must not leak between
// tests.
//
// If the agent is not installed the test is skipped with the command that
// installs it, or fails when CI=true, where a skip would hide a broken setup.
func ClaudeAgentMock(t testing.TB) (argv []string, env []string, mock *mockllm.Server) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("find repository root: %v", err)
	}
	entry := filepath.Join(root, filepath.FromSlash(claudeAgentEntry))
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(entry); err != nil || nodeErr != nil {
		msg := fmt.Sprintf("claude-agent-acp is not installed (%v); run: %s",
			errors.Join(err, nodeErr), filepath.Join(root, "scripts", "e2e-setup.sh"))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}

	mock, url, err := mockllm.Start(t.Context(), mockllm.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("start mock LLM: %v", err)
	}
	t.Cleanup(func() {
		if err := mock.Close(); err != nil {
			t.Errorf("close mock LLM: %v", err)
		}
	})

	env = cleanEnv(os.Environ())
	env = append(env,
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
	return []string{node, entry}, env, mock
}

// cleanEnv drops the variables that would point the agent at a real API,
// a real account or a proxy, or share state between tests.
func cleanEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.HasPrefix(u, "ANTHROPIC_"), strings.HasPrefix(u, "CLAUDE_"),
			u == "HTTP_PROXY", u == "HTTPS_PROXY", u == "ALL_PROXY", u == "NO_PROXY",
			u == "HOME", u == "XDG_CONFIG_HOME", u == "IS_SANDBOX":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// repoRoot is the directory holding this module's go.mod.
func repoRoot() (string, error) { return testbin.RepoRoot() }
