// Package e2e runs real ACP agents, offline, against conformance/mockllm, to
// pin down what they actually send, to compare a session run directly with
// the same session run through the sidecar, and to take the agents editors
// install today (claude-agent-acp on the mock's Anthropic API, codex-acp on
// its Responses API) through every rebuild the sidecar does.
//
// The package holds only tests. The agents are not vendored: run
// scripts/e2e-setup.sh once to install them under .cache/e2e. Without them
// the tests skip, except in CI (CI=true), where they fail. What was
// observed of each agent is in NOTES.md. The tests need Linux (they kill
// agents and wait on pidfds, and read /proc), and their build tags say so.
package e2e
