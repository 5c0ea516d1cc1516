//go:build linux

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// TestSubagentSessions: a child session the agent opens inside a turn is not
// the client's (DESIGN.md "A session's whole life"). Its frames and its
// permission request reach the client as they are; its tool calls are
// recorded under the parent's turn, its message is not the parent's
// answer; it is in neither `sessions` nor the emulated session/list; and a
// crash rebuilds the parent alone.
func TestSubagentSessions(t *testing.T) {
	t.Parallel()
	dir, store := t.TempDir(), t.TempDir()
	calls := filepath.Join(dir, "calls.jsonl")
	var stderr acpclient.Buffer
	agent := []string{"acp-sidecar", "fakeagent", "-subagents", "-resume", "-state", filepath.Join(dir, "state.json"), "-call-log", calls}
	lp := &ladderPeer{calls: calls, stderr: &stderr, nextID: 1}
	lp.peer = startPeer(boundedCtx(t), t, &stderr, sidecarArgv(t, []string{"--state-dir", store}, agent...)...)
	lp.call(`1`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"subagents":{}}}}`)
	_, resp := lp.request("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}})
	lp.sid = sessionIDFrom(t, resp)
	child := fakeagent.SubagentPrefix + "1"

	from := len(lp.lines())
	lp.send(`{"jsonrpc":"2.0","id":50,"method":"session/prompt","params":{"sessionId":"` + lp.sid + `","prompt":[{"type":"text","text":"subagent"}]}}`)
	perm := lp.await("the child's permission request", acpclient.HasMethod("session/request_permission"))
	if !strings.Contains(string(perm), `"sessionId":"`+child+`"`) {
		t.Errorf("permission request = %s, want it for the child session %s, as the agent sent it", clip(perm), child)
	}
	lp.send(`{"jsonrpc":"2.0","id":` + rawID(t, perm) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	done := lp.await("the prompt's response", acpclient.HasID(`50`))
	mustSucceed(t, "the subagent prompt", done)
	var childFrames int
	for _, l := range lp.lines()[from:] {
		if u, ok := parseUpdate(l); ok && u.sessionID == child {
			childFrames++
		}
	}
	if childFrames < 3 {
		t.Errorf("the client saw %d session/update frames of the child, want its message, tool call and update", childFrames)
	}

	// The record: the child's tool call under the parent's turn, its
	// message not in the parent's answer, the child nowhere as a session.
	var rec struct {
		Turns []struct {
			Answer    string `json:"answer"`
			ToolCalls []struct {
				Title  string `json:"title"`
				Status string `json:"status"`
			} `json:"toolCalls"`
		} `json:"turns"`
	}
	showInto(t, &rec, lp.sid, "--state-dir", store)
	if len(rec.Turns) != 1 {
		t.Fatalf("show --json: %d turns, want 1", len(rec.Turns))
	}
	turn := rec.Turns[0]
	found := false
	for _, tc := range turn.ToolCalls {
		found = found || tc.Title == "List the workspace" && tc.Status == "completed"
	}
	if !found {
		t.Errorf("the parent's turn records tool calls %+v, want the child's \"List the workspace\", completed", turn.ToolCalls)
	}
	if strings.Contains(turn.Answer, "fake-subagent") {
		t.Errorf("the parent's answer holds the child's message: %q", turn.Answer)
	}
	if out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "sessions", "--json", "--state-dir", store).Output(); err != nil || strings.Contains(string(out), child) {
		t.Errorf("sessions --json (%v) lists the child:\n%s", err, out)
	}
	if _, list := lp.request("session/list", map[string]any{}); strings.Contains(string(list), child) || !strings.Contains(string(list), lp.sid) {
		t.Errorf("the emulated session/list = %s, want the parent and not the child", clip(list))
	}

	// A crash: the parent is rebuilt, the child is not.
	killAgent(t, lp.peer)
	presp, _, _ := lp.prompt("after the crash")
	mustSucceed(t, "prompt after the crash", presp)
	for _, c := range secondLife(t, readCalls(t, calls)) {
		if c.SessionID == child {
			t.Errorf("after the crash the sidecar sent %s for the child session", describe(c))
		}
	}
}
