//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// The recovery ladder with real processes (docs/recovery.md, "When the agent dies"):
// the fake agent keeps its sessions in a -state file, so the agent the
// sidecar restarts after a SIGKILL can really resume or load them.

// childrenOf lists the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []proc {
	t.Helper()
	var out []proc
	for _, p := range descendantsOf(t, pid) {
		if ppid, _, _, _, ok := stat(p.pid); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// agentOf returns the sidecar's one agent process.
func agentOf(t *testing.T, p *peer) proc {
	t.Helper()
	kids := childrenOf(t, p.c.Pid())
	if len(kids) != 1 {
		t.Fatalf("sidecar children %v, want exactly one agent", kids)
	}
	return kids[0]
}

// killAgent SIGKILLs the sidecar's agent and waits until it is reaped.
func killAgent(t *testing.T, p *peer) proc {
	t.Helper()
	a := agentOf(t, p)
	if err := syscall.Kill(a.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "the killed agent to be reaped", func() bool {
		_, _, start, _, ok := stat(a.pid)
		return !ok || start != a.start
	})
	return a
}

// waitFor polls cond until it holds or the peer's bounded context ends.
func waitFor(t *testing.T, p *peer, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-p.ctx.Done():
			t.Fatalf("waiting for %s: %v", what, p.ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readCalls reads the fake agent's call log (both lives append to it).
func readCalls(t *testing.T, path string) []fakeagent.Call {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(path)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// secondLife returns the calls the restarted agent got, from its initialize
// on, without the readiness probes.
func secondLife(t *testing.T, calls []fakeagent.Call) []fakeagent.Call {
	t.Helper()
	n := 0
	for i, c := range calls {
		if c.Method == "initialize" {
			n++
			if n == 2 {
				return slices.DeleteFunc(slices.Clone(calls[i:]), func(c fakeagent.Call) bool { return c.Method == "_fake/echo" })
			}
		}
	}
	t.Fatalf("the call log has no second initialize: %v", fakeagent.Methods(calls))
	return nil
}

// describe names a call with the config it sets, for compact assertions.
func describe(c fakeagent.Call) string {
	var p struct {
		ConfigID string `json:"configId"`
		Value    string `json:"value"`
		ModeID   string `json:"modeId"`
		ModelID  string `json:"modelId"`
	}
	_ = json.Unmarshal(c.Params, &p)
	switch c.Method {
	case "session/set_config_option":
		return c.Method + " " + p.ConfigID + "=" + p.Value
	case "session/set_mode":
		return c.Method + " " + p.ModeID
	case "session/set_model":
		return c.Method + " " + p.ModelID
	}
	return c.Method
}

func describeAll(calls []fakeagent.Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = describe(c)
	}
	return out
}

// update is the part of a session/update line the ladder tests look at.
type update struct {
	sessionID, kind, text string
}

func parseUpdate(line []byte) (update, bool) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "session/update" {
		return update{}, false
	}
	return update{m.Params.SessionID, m.Params.Update.SessionUpdate, m.Params.Update.Content.Text}, true
}

// ladderPeer is a client of a sidecar in front of a fake agent with -state.
type ladderPeer struct {
	*peer
	calls  string // the fake agent's call log
	stderr *acpclient.Buffer
	sid    string // the client's session id
	nextID int
}

func (lp *ladderPeer) request(method string, params map[string]any) (string, []byte) {
	lp.t.Helper()
	lp.nextID++
	id := fmt.Sprint(lp.nextID)
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": lp.nextID, "method": method, "params": params})
	if err != nil {
		lp.t.Fatal(err)
	}
	return id, lp.call(id, string(b))
}

func mustSucceed(t *testing.T, what string, resp []byte) {
	t.Helper()
	if !strings.Contains(string(resp), `"result"`) {
		t.Fatalf("%s failed: %s", what, clip(resp))
	}
}

// prompt sends a prompt and returns its response, the agent text streamed
// for it and every line that arrived from the send to the response.
func (lp *ladderPeer) prompt(text string) (resp []byte, agentText string, window [][]byte) {
	lp.t.Helper()
	from := len(lp.lines())
	_, resp = lp.request("session/prompt", map[string]any{"sessionId": lp.sid, "prompt": []map[string]any{{"type": "text", "text": text}}})
	window = lp.lines()[from:lp.seen]
	return resp, chunkText(window, lp.sid), window
}

// chunkText is the agent's text for session sid in lines: its
// agent_message_chunks, joined.
func chunkText(lines [][]byte, sid string) string {
	var b strings.Builder
	for _, l := range lines {
		if u, ok := parseUpdate(l); ok && u.sessionID == sid && u.kind == "agent_message_chunk" {
			b.WriteString(u.text)
		}
	}
	return b.String()
}

// startLadder starts the sidecar in front of a fake agent with -state and
// opens a session with model deep-3, mode plan and two turns.
func startLadder(t *testing.T, agentFlags ...string) *ladderPeer {
	t.Helper()
	return startLadderWith(t, nil, func(agent []string) []string { return agent }, agentFlags...)
}

// startLadderWith is startLadder with sidecar flags, and the agent command
// passed through wrap (a shell that gates the agent's later lives).
func startLadderWith(t *testing.T, sidecarFlags []string, wrap func(agent []string) []string, agentFlags ...string) *ladderPeer {
	t.Helper()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls.jsonl")
	// -strict-init, as codex-acp 2.6.0 is: a client request that reached a
	// restarted agent ahead of the sidecar's initialize fails with -32600.
	argv := append([]string{"acp-sidecar", "fakeagent", "-strict-init", "-state", filepath.Join(dir, "state.json"), "-call-log", calls}, agentFlags...)
	var stderr acpclient.Buffer
	lp := &ladderPeer{calls: calls, stderr: &stderr, nextID: 1}
	lp.peer = startPeer(boundedCtx(t), t, &stderr, sidecarArgv(t, sidecarFlags, wrap(argv)...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", stderr.String())
			if b, err := os.ReadFile(calls); err == nil {
				t.Logf("call log:\n%s", b)
			}
		}
	})
	initialize(lp.peer)
	_, resp := lp.request("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}})
	lp.sid = sessionIDFrom(t, resp)
	_, resp = lp.request("session/set_config_option", map[string]any{"sessionId": lp.sid, "configId": "model", "value": fakeagent.ModelDeep})
	mustSucceed(t, "set model", resp)
	_, resp = lp.request("session/set_mode", map[string]any{"sessionId": lp.sid, "modeId": "plan"})
	mustSucceed(t, "set mode", resp)
	for _, text := range []string{"alpha kept turn", "bravo kept turn"} {
		resp, got, _ := lp.prompt(text)
		mustSucceed(t, "prompt "+text, resp)
		if r, ok := fakeagent.ParseReply(got); !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
			t.Fatalf("reply before the crash = %+v (%v), want deep-3 / plan", r, ok)
		}
	}
	lp.barrier() // the updates that follow the last response are out
	return lp
}

// crash SIGKILLs the agent between turns and waits until its successor is
// up: it got its initialize and answers requests through the sidecar (a
// probe that no session owns, so no rebuild starts). It returns the index of
// the first line received after the kill.
func (lp *ladderPeer) crash() int {
	lp.t.Helper()
	from := len(lp.lines())
	old := killAgent(lp.t, lp.peer)
	waitFor(lp.t, lp.peer, "the restarted agent's initialize", func() bool {
		calls, _ := fakeagent.ReadCallLog(lp.calls)
		return count(fakeagent.Methods(calls), "initialize") >= 2
	})
	if a := agentOf(lp.t, lp.peer); a == old {
		lp.t.Fatalf("agent %v was not restarted", a)
	}
	// A request for no session waits for the restarted agent.
	_, resp := lp.request("_fake/echo", map[string]any{"probe": true})
	if !strings.Contains(string(resp), `"result"`) {
		lp.t.Fatalf("probe after the restart: %s", clip(resp))
	}
	return from
}

// promptAfterCrash sends the next prompt, which must succeed the first
// time: while the agent restarts, the sidecar holds it.
func (lp *ladderPeer) promptAfterCrash(text string) (resp []byte, agentText string, window [][]byte) {
	lp.t.Helper()
	resp, agentText, window = lp.prompt(text)
	mustSucceed(lp.t, "prompt after the crash", resp)
	return resp, agentText, window
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// restoreCalls is the config the sidecar must set on the rebuilt native
// session: model deep-3 and mode plan, in the order its planner chooses.
var restoreCalls = []string{"session/set_config_option model=deep-3", "session/set_config_option mode=plan"}

// checkSecondLife asserts the restarted agent got initialize, then the rungs
// (in order), then the config restored, then the prompt, and nothing else.
func checkSecondLife(t *testing.T, calls []fakeagent.Call, rungs ...string) {
	t.Helper()
	want := append([]string{"initialize"}, rungs...)
	want = append(want, restoreCalls...)
	want = append(want, "session/prompt")
	if got := describeAll(calls); !slices.Equal(got, want) {
		t.Errorf("the restarted agent got\n  %q\nwant\n  %q", got, want)
	}
}

func checkReply(t *testing.T, text, native string, turns, blocks int) fakeagent.Reply {
	t.Helper()
	r, ok := fakeagent.ParseReply(text)
	if !ok {
		t.Fatalf("no reply line in %q", text)
	}
	if r.Session != native || r.Model != fakeagent.ModelDeep || r.Mode != "plan" || r.Turns != turns || r.Blocks != blocks {
		t.Errorf("reply after the crash = session=%s model=%s mode=%s turns=%d blocks=%d, want session=%s model=deep-3 mode=plan turns=%d blocks=%d",
			r.Session, r.Model, r.Mode, r.Turns, r.Blocks, native, turns, blocks)
	}
	head, _, _ := strings.Cut(text, "<<<fake-agent echo ") // an echoed handoff repeats earlier replies
	if n := strings.Count(head, fakeagent.ReplyPrefix); n != 1 {
		t.Errorf("the client got %d reply lines for the prompt after the crash, want 1: %q", n, text)
	}
	return r
}

// TestLadderResume: an agent that can resume gets session/resume, and
// neither load nor new; the config comes back; no handoff is prepended.
func TestLadderResume(t *testing.T) {
	t.Parallel()
	lp := startLadder(t, "-resume")
	lp.crash()
	_, text, _ := lp.promptAfterCrash("charlie after crash")
	checkSecondLife(t, secondLife(t, readCalls(t, lp.calls)), "session/resume")
	checkReply(t, text, "fake-sess-1", 3, 1)
}

// The load rung (no resume: the sidecar loads the native session, and the
// agent's replay never reaches the client) is testdata/script/
// scenario_kill_between.txtar.

// TestLadderLoadFails: a failed load falls back to session/new, and the
// next prompt carries the kept turns as a handoff, on the restored config.
func TestLadderLoadFails(t *testing.T) {
	t.Parallel()
	lp := startLadder(t, "-load-fails")
	lp.crash()
	_, text, _ := lp.promptAfterCrash("echo: charlie after crash")
	checkSecondLife(t, secondLife(t, readCalls(t, lp.calls)), "session/load", "session/new")
	r := checkReply(t, text, "fake-sess-2", 1, 2)
	if len(r.Echo) != 2 {
		t.Fatalf("echo = %q, want the handoff block and the prompt", r.Echo)
	}
	for _, kept := range []string{"alpha kept turn", "bravo kept turn"} {
		if !strings.Contains(r.Echo[0], kept) {
			t.Errorf("handoff block lacks the kept turn %q:\n%s", kept, r.Echo[0])
		}
	}
	if r.Echo[1] != "echo: charlie after crash" {
		t.Errorf("last block = %q, want the prompt itself", r.Echo[1])
	}
}

// TestCrashLoop: when every restarted agent dies at once, a request waits
// through the restarts and gets a clear -32012 error, never a hang, and once the restart budget is spent
// the sidecar exits with the agent's last status when the client leaves.
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "started")
	agent := `if [ -f "$1" ]; then exit 3; fi; touch "$1"; exec acp-sidecar fakeagent`
	var stderr acpclient.Buffer
	p := startPeer(boundedCtx(t), t, &stderr, sidecarArgv(t, []string{"--max-restarts", "2", "--restart-window", "1m"},
		"sh", "-c", agent, "sh", marker)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", stderr.String())
		}
	})
	initialize(p)
	resp := p.call(`2`, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	sid := sessionIDFrom(t, resp)
	killAgent(t, p)
	// The prompt waits through the restarts, and when the budget is spent
	// it is answered (p.call is bounded) with the reason.
	resp = p.call(`3`, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}}`, sid))
	if _, code, msg := decodeRPCError(t, resp); code != -32012 || !strings.Contains(msg, "no longer restarted") {
		t.Fatalf("the prompt during the crash loop got %d (%s), want -32012 saying the agent is no longer restarted", code, msg)
	}
	if code := p.finish(); code != 3 {
		t.Errorf("exit status %d, want 3 (the last agent's)", code)
	}
}

func sessionIDFrom(t *testing.T, resp []byte) string {
	t.Helper()
	var r struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp, &r); err != nil || r.Result.SessionID == "" {
		t.Fatalf("session/new: %s (%v)", clip(resp), err)
	}
	return r.Result.SessionID
}
