//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogHoldsNoConversation: at the default log level, nothing the user
// or the agent said reaches the sidecar's log, through a session that
// exercises every path that logs: set_*, prompts, a reset, a rewind, a
// crash and its recovery, a refused --set.
func TestLogHoldsNoConversation(t *testing.T) {
	ctx := boundedCtx(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "sidecar.log")
	const secret = "purple-elephant-4711"
	argv := []string{"acp-sidecar", "--state-dir", dir, "--log-file", logPath, "--set", "effort=" + secret, "--", "acp-sidecar", "fakeagent"}
	p := startPeer(ctx, t, nil, argv...)
	p.call("1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	p.call("2", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	prompt := func(id, text string) {
		p.call(id, `{"jsonrpc":"2.0","id":`+id+`,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"`+text+`"}]}}`)
	}
	p.call("3", `{"jsonrpc":"2.0","id":3,"method":"session/set_config_option","params":{"sessionId":"fake-sess-1","configId":"model","value":"deep-3"}}`)
	prompt("4", "my password is "+secret)
	prompt("5", "/reset")
	prompt("6", "again "+secret)
	prompt("7", "/rewind")
	prompt("8", "crash now "+secret)
	p.finish()
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) == 0 {
		t.Fatal("the log is empty; the test would prove nothing")
	}
	if strings.Contains(string(log), "my password") || strings.Contains(string(log), "again") {
		t.Errorf("the log holds prompt text:\n%s", log)
	}
	// The refused --set value is the user's configuration, not the
	// conversation: it is named so the user can fix it.
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, secret) && !strings.Contains(line, "start-up setting") {
			t.Errorf("the log holds conversation text: %s", line)
		}
	}
}

// TestDemo runs the README's first command as a newcomer would, and checks
// the story it tells: the config kept across a reset, the kept turn handed
// over after a rewind and not the rewound one, the session surviving a
// crash, and the record at the end, with why each native session was made.
func TestDemo(t *testing.T) {
	ctx := boundedCtx(t)
	out, err := exec.CommandContext(ctx, "acp-sidecar", "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	story := string(out)
	for _, want := range []string{
		"reset done",
		"native session fake-sess-2, model=deep-3 effort=max mode=plan",
		"taken back:\n   sidecar: - My favourite animal is an otter",
		"| My favourite colour is teal",
		"the agent exited (exit status 3)",
		"the agent got 2 content blocks",
		"turn 4 rolled_back",
		"interrupted",
		// The record says why each native session was made.
		"native sessions fake-sess-1 (new) → fake-sess-2 (reset) → fake-sess-3 (rewind) → fake-sess-1 (crash)",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the demo does not say %q:\n%s", want, story)
		}
	}
	after := story[strings.Index(story, "echo: What did I say first?"):]
	after = after[:strings.Index(after, "editor: \"echo: And now?\"")]
	if strings.Contains(after, "otter") {
		t.Errorf("the handoff after the rewind mentions the otter:\n%s", after)
	}
}
