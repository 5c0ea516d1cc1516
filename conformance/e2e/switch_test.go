//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// The sidecar with two named agents, real claude-agent-acp (the default)
// and the built-in fake agent, moves one client session from claude to the
// fake agent and back (docs/agents.md). What claude got handed
// over is read from the mock LLM's log: the conversation the LLM saw.

// agentSelector is the config option the sidecar adds to every configOptions
// list when it runs several agents.
const agentSelector = "_sidecar_agent"

// shellWords quotes argv for --agent NAME=COMMAND, which the sidecar splits
// as a shell would: single quotes keep everything but a single quote, which
// is closed, escaped and reopened.
func shellWords(argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// selectorIn returns the agent selector among opts, checking its shape, or
// nil when there is none.
func selectorIn(t *testing.T, opts []configOption) *configOption {
	t.Helper()
	for i, o := range opts {
		if o.ID != agentSelector {
			continue
		}
		var values []string
		for _, v := range o.Options {
			values = append(values, v.Value)
		}
		if o.Category != "_agent" || o.Type != "select" || !slices.Equal(values, []string{"claude", "fake"}) {
			t.Errorf("selector %+v: want category _agent, type select, values [claude fake]", o)
		}
		return &opts[i]
	}
	return nil
}

// optionsOf decodes the configOptions list of a result.
func optionsOf(t *testing.T, res json.RawMessage) []configOption {
	t.Helper()
	var v struct {
		ConfigOptions []configOption `json:"configOptions"`
	}
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatalf("decode configOptions from %s: %v", res, err)
	}
	return v.ConfigOptions
}

// TestClaudeSwitchToFakeAndBack: a session starts on claude, moves to the
// fake agent with the selector and back with /agent. Each agent gets the
// turns it has not seen as a handoff, and the client's session id never
// changes.
func TestClaudeSwitchToFakeAndBack(t *testing.T) {
	argv, env, mock := ClaudeAgentMock(t)
	bin := sidecarBinary(t)
	// Agents inherit the sidecar's environment, so the sidecar runs with
	// claude's (the mock's URL, a fresh HOME); the fake agent ignores it.
	// No `-- AGENT`: startSidecarState's trailing "--" then ends the flags
	// and adds no agent.
	calls := filepath.Join(t.TempDir(), "fake-calls.jsonl")
	a := startSidecarState(t, nil, env, t.TempDir(), t.TempDir(), "--grace", "1s",
		"--agent", "claude="+shellWords(argv...),
		"--agent", "fake="+shellWords(bin, "fakeagent", "-id-prefix", "f-", "-call-log", calls),
	)
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			data, err := os.ReadFile(calls)
			t.Logf("fake agent call log (%v):\n%s", err, data)
		}
	})
	s := &sidecarSession{t: t, a: a, mock: mock, argv: argv}

	// 1. A new session starts on the default agent, claude.
	var result json.RawMessage
	s.sid, result = openSession(t, a)
	if sel := selectorIn(t, optionsOf(t, result)); sel == nil || sel.CurrentValue != "claude" {
		t.Fatalf("session/new: selector %+v, want currentValue claude: %s", sel, result)
	}

	// 2. One turn on claude.
	const onClaude = "first question on claude"
	if reply := agentText(t, s.prompt(onClaude)); !strings.Contains(reply, "mock-llm: model=") {
		t.Errorf("claude answered %q, want the mock LLM's reply", reply)
	}

	// 3. To the fake agent with the selector: the answer is the fake
	// agent's options with the selector on fake.
	res := step(t, a, "session/set_config_option", map[string]any{"sessionId": s.sid, "configId": agentSelector, "value": "fake"})
	opts := optionsOf(t, res.Result)
	var ids []string
	for _, o := range opts {
		ids = append(ids, o.ID)
	}
	if want := []string{fakeagent.OptionModel, fakeagent.OptionEffort, fakeagent.OptionMode, fakeagent.OptionVerbosity, agentSelector}; !slices.Equal(ids, want) {
		t.Errorf("options after the switch to fake %q, want the fake agent's and the selector %q: %s", ids, want, res.Result)
	}
	if sel := selectorIn(t, opts); sel == nil || sel.CurrentValue != "fake" {
		t.Errorf("selector after the switch to fake %+v, want currentValue fake", sel)
	}

	// 4. One turn on the fake agent, which gets the claude turn handed
	// over as a text block ahead of the question.
	const onFake = "question for the fake agent"
	text := agentText(t, s.prompt(onFake))
	if !strings.HasPrefix(text, fakeagent.ReplyPrefix) {
		t.Errorf("the fake agent answered %q, want a line starting %q", text, fakeagent.ReplyPrefix)
	}
	if r, ok := fakeagent.ParseReply(text); !ok || !strings.HasPrefix(r.Session, "f-") || r.Text != onFake || r.Blocks != 2 {
		t.Errorf("fake agent reply %+v (parsed %v), want native session f-…, text %q, 2 blocks (handoff and question)", r, ok, onFake)
	}
	fakePrompts := promptsIn(t, calls)
	if len(fakePrompts) != 1 || len(fakePrompts[0]) != 2 || fakePrompts[0][1] != onFake {
		t.Fatalf("the fake agent got prompts %q, want one: the handoff, then %q", fakePrompts, onFake)
	}
	if h := fakePrompts[0][0]; !inOrder(h, handoffHeader, "<turn 1 user>", onClaude, "</turn 1 user>", "<turn 1 assistant from agent claude>", "mock-llm: model=") {
		t.Errorf("the handoff the fake agent got lacks claude's turn 1, in order:\n%s", h)
	}

	// 5. Back to claude with the slash command, which the sidecar answers.
	slash := s.prompt("/agent claude")
	if text := agentText(t, slash); !strings.Contains(text, "now runs on claude (was fake)") {
		t.Errorf("/agent claude answered %q, want it to say the session now runs on claude", text)
	}
	// The slash command's answer cannot carry the options, so an update
	// tells the client claude's list, the selector on claude.
	told := false
	for _, f := range slash {
		if f.Method == "session/update" && strings.Contains(string(f.Raw), `"config_option_update"`) && strings.Contains(string(f.Raw), `"currentValue":"claude"`) {
			told = true
		}
	}
	if !told {
		t.Errorf("after /agent claude the client was not sent claude's options with the selector on claude")
	}

	// 6. One turn on claude, in a fresh native session that got everything
	// kept, the fake agent's turn included, as one handoff.
	const back = "back on claude"
	if reply := agentText(t, s.prompt(back)); !strings.Contains(reply, "last="+back) {
		t.Errorf("claude answered %q, want the mock's reply to %q", reply, back)
	}
	reqs := mock.MessageRequests()
	for _, r := range reqs {
		t.Logf("mock saw: model=%s messages=%d last=%.60q", r.Model, r.Messages(), r.LastUserText())
	}
	turn := lastTurnRequest(t, reqs, back)
	texts := turn.Texts()
	var handoffs []string
	for _, txt := range texts {
		if strings.HasPrefix(txt, handoffHeader) {
			handoffs = append(handoffs, txt)
		}
	}
	if len(handoffs) != 1 {
		t.Fatalf("the %q request carries %d handoff blocks, want 1; texts %q", back, len(handoffs), texts)
	}
	h := handoffs[0]
	t.Logf("the handoff claude got:\n%s", h)
	if !inOrder(h,
		"<turn 1 user>", onClaude, "</turn 1 user>", "<turn 1 assistant from agent claude>", "mock-llm: model=", "</turn 1 assistant>",
		"<turn 2 user>", onFake, "</turn 2 user>", "<turn 2 assistant from agent fake>", fakeagent.ReplyPrefix, "</turn 2 assistant>") {
		t.Errorf("the handoff claude got lacks the claude turn and the fake agent's turn, in order:\n%s", h)
	}
	if strings.Contains(h, "/agent claude") {
		t.Errorf("the handoff holds the /agent command, which no agent ran:\n%s", h)
	}
	// A fresh conversation: the handoff and the prompt in one user message.
	if n := turn.Messages(); n != 1 {
		t.Errorf("the %q request has %d messages, want 1 (a fresh native session)", back, n)
	}
	// The earlier claude session is not resumed: a switch always gets a
	// fresh native session, so only the handoff carries the first turn.
	if first, last := requestSession(t, lastTurnRequest(t, reqs, onClaude)), requestSession(t, turn); first == last {
		t.Errorf("%q was sent from claude session %s, the one the first turn ran in; want a fresh one", back, first)
	}

	checkSessionIDs(t, a.framesSince(0), s.sid)
}

// lastTurnRequest returns the last of reqs whose last user text is text.
// claude may send more than one request per turn (titles and the like), so
// the turn's is the last one that carries the prompt.
func lastTurnRequest(t *testing.T, reqs []mockllm.Request, text string) mockllm.Request {
	t.Helper()
	for _, r := range slices.Backward(reqs) {
		if r.LastUserText() == text {
			return r
		}
	}
	t.Fatalf("no request to the LLM carries %q as its last user text", text)
	return mockllm.Request{}
}

// promptsIn returns the prompts a fake agent's -call-log holds, each as the
// texts of its blocks.
func promptsIn(t *testing.T, path string) [][]string {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(path)
	if err != nil {
		t.Fatalf("fake agent calls: %v", err)
	}
	var out [][]string
	for _, c := range calls {
		if c.Method != "session/prompt" {
			continue
		}
		var p struct {
			Prompt []struct {
				Text string `json:"text"`
			} `json:"prompt"`
		}
		if err := json.Unmarshal(c.Params, &p); err != nil {
			t.Fatalf("decode the fake agent's prompt %s: %v", c.Params, err)
		}
		var texts []string
		for _, b := range p.Prompt {
			texts = append(texts, b.Text)
		}
		out = append(out, texts)
	}
	return out
}

// inOrder reports whether s holds every one of parts, each after the one
// before it.
func inOrder(s string, parts ...string) bool {
	for _, p := range parts {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}
