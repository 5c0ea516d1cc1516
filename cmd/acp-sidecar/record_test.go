//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// recordPeer drives one session of the fake agent through a sidecar on a
// state dir, with a raw client.
type recordPeer struct {
	*peer
	sid  string
	next int
}

func startRecordPeer(t *testing.T, dir, prefix string) *recordPeer {
	ctx := boundedCtx(t)
	p := startPeer(ctx, t, nil, "acp-sidecar", "--state-dir", dir, "--", "acp-sidecar", "fakeagent", "-id-prefix", prefix)
	p.call("1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	p.call("2", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	return &recordPeer{peer: p, sid: prefix + "1", next: 10}
}

// prompt sends a prompt and waits for its response.
func (r *recordPeer) prompt(text string) []byte {
	r.next++
	id := fmt.Sprint(r.next)
	return r.call(id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, id, r.sid, text))
}

// showInto decodes `acp-sidecar show SID --json`, run as a user in a shell
// runs it on where (--state-dir DIR, or --store URL), into v.
func showInto(t *testing.T, v any, sid string, where ...string) {
	t.Helper()
	out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", append([]string{"show", sid, "--json"}, where...)...).Output()
	if err != nil {
		t.Fatalf("show %s: %v\n%s", sid, err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("show %s --json: %v\n%s", sid, err, out)
	}
}

// showTurns is the record's turns of sid in dir, from `show --json`.
func showTurns(t *testing.T, dir, sid string) (turns []struct {
	Index          int
	Status, Prompt string
}) {
	t.Helper()
	var rec struct {
		Turns []struct {
			Index  int    `json:"index"`
			Status string `json:"status"`
			Prompt string `json:"prompt"`
		} `json:"turns"`
	}
	showInto(t, &rec, sid, "--state-dir", dir)
	for _, tr := range rec.Turns {
		turns = append(turns, struct {
			Index          int
			Status, Prompt string
		}{tr.Index, tr.Status, tr.Prompt})
	}
	return turns
}

// TestSidecarKilledMidTurn: SIGKILL the sidecar in the middle of a streamed
// turn. A new sidecar on the same state dir lists every completed turn; the
// interrupted one is absent or interrupted, never a completed turn with half
// an answer.
func TestSidecarKilledMidTurn(t *testing.T) {
	dir := t.TempDir()
	r := startRecordPeer(t, dir, "kill-")
	r.prompt("first")
	r.prompt("second")
	r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream 100000 200"}]}}`, r.sid))
	r.await("streamed chunks", func(l []byte) bool {
		return strings.Contains(string(l), "agent_message_chunk") && strings.Contains(string(l), "abcdefghij")
	})
	if err := syscall.Kill(r.c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.c.Wait(r.ctx)

	// A new sidecar opens the store; the record has both completed turns.
	next := startRecordPeer(t, dir, "next-")
	out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "sessions", "--json", "--state-dir", dir).Output()
	if err != nil || !strings.Contains(string(out), `"kill-1"`) {
		t.Fatalf("sessions: %v\n%s", err, out)
	}
	var got []string
	for _, tr := range showTurns(t, dir, "kill-1") {
		got = append(got, fmt.Sprintf("%d %s %s", tr.Index, tr.Status, tr.Prompt))
	}
	if len(got) < 2 || got[0] != "1 completed first" || got[1] != "2 completed second" {
		t.Fatalf("turns after the kill: %q; want both completed turns", got)
	}
	for _, g := range got[2:] {
		if !strings.Contains(g, "interrupted") {
			t.Errorf("the turn cut by the kill is recorded as %q; want it absent or interrupted", g)
		}
	}
	next.finish()
}

// TestTwoSidecarsShareTheStore: two sidecars on one state dir each run a
// session; the CLI reads both while both run; the store's owner is killed
// and the other finishes its session: nothing is lost.
func TestTwoSidecarsShareTheStore(t *testing.T) {
	dir := t.TempDir()
	a := startRecordPeer(t, dir, "a-")
	b := startRecordPeer(t, dir, "b-")
	a.prompt("a one")
	b.prompt("b one")
	out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "sessions", "--json", "--state-dir", dir).Output()
	if err != nil {
		t.Fatalf("sessions: %v\n%s", err, out)
	}
	var list []struct {
		SessionID string `json:"sessionId"`
		Live      bool   `json:"live"`
	}
	json.Unmarshal(out, &list)
	live := map[string]bool{}
	for _, s := range list {
		live[s.SessionID] = s.Live
	}
	if !live["a-1"] || !live["b-1"] {
		t.Errorf("sessions while both run: %s; want a-1 and b-1, live", out)
	}
	// a opened the store first, so a owns it.
	if err := syscall.Kill(a.c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.c.Wait(a.ctx)
	b.prompt("b two")
	b.prompt("b three")
	b.finish()
	var gotB, gotA []string
	for _, tr := range showTurns(t, dir, "b-1") {
		gotB = append(gotB, tr.Status+" "+tr.Prompt)
	}
	for _, tr := range showTurns(t, dir, "a-1") {
		gotA = append(gotA, tr.Status+" "+tr.Prompt)
	}
	if strings.Join(gotB, ",") != "completed b one,completed b two,completed b three" {
		t.Errorf("b's turns: %q", gotB)
	}
	if strings.Join(gotA, ",") != "completed a one" {
		t.Errorf("a's turns: %q", gotA)
	}
}
