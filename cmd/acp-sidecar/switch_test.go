//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// Switching agents mid-conversation with real processes: two fake agents
// with different profiles behind one sidecar, one client session.

// switchPeer is a client of a sidecar with agents a and b.
type switchPeer struct {
	*ladderPeer
	callsA, callsB string
	init           []byte // the initialize response
}

// startSwitch starts the sidecar with two fake agents: a (the default
// profile, legacy modes and models too) and b (config options only), with
// session ids that tell them apart.
func startSwitch(t *testing.T, flags ...string) *switchPeer {
	t.Helper()
	return startSwitchIn(t, t.TempDir(), t.TempDir(), "", "", flags...)
}

// startSwitchIn is startSwitch with the state dir, the dir for the call
// logs, and extra flags for each agent given.
func startSwitchIn(t *testing.T, stateDir, dir, aFlags, bFlags string, flags ...string) *switchPeer {
	t.Helper()
	sp := &switchPeer{callsA: filepath.Join(dir, "a.jsonl"), callsB: filepath.Join(dir, "b.jsonl")}
	agents := []string{
		"--agent", "a=acp-sidecar fakeagent -id-prefix a- -call-log " + sp.callsA + " " + aFlags,
		"--agent", "b=acp-sidecar fakeagent -id-prefix b- -profile config-options-only -call-log " + sp.callsB + " " + bFlags,
	}
	argv := append([]string{"acp-sidecar", "--state-dir", stateDir}, append(agents, flags...)...)
	var stderr acpclient.Buffer
	lp := &ladderPeer{stderr: &stderr, nextID: 1}
	lp.peer = startPeer(boundedCtx(t), t, &stderr, argv...)
	sp.ladderPeer = lp
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", stderr.String())
			for _, f := range []string{sp.callsA, sp.callsB} {
				if b, err := os.ReadFile(f); err == nil {
					t.Logf("%s:\n%s", filepath.Base(f), b)
				}
			}
		}
	})
	sp.init = lp.call(`1`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	_, resp := lp.request("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}})
	lp.sid = sessionIDFrom(t, resp)
	if got := selectorValue(t, resp, "result"); got != "a" {
		t.Fatalf("session/new selector = %q, want a: %s", got, clip(resp))
	}
	return sp
}

// selectorValue returns the agent selector's current value in the
// configOptions list under key ("result" or "update"), "" when absent.
func selectorValue(t *testing.T, line []byte, key string) string {
	t.Helper()
	for _, o := range optionsIn(t, line, key) {
		if o.ID == "_sidecar_agent" {
			if o.Category != "_agent" || o.Type != "select" || len(o.Options) != 2 {
				t.Fatalf("selector is malformed: %+v", o)
			}
			return o.CurrentValue
		}
	}
	return ""
}

type wireOpt struct {
	ID           string `json:"id"`
	Category     string `json:"category"`
	Type         string `json:"type"`
	CurrentValue string `json:"currentValue"`
	Options      []struct {
		Value string `json:"value"`
	} `json:"options"`
}

func optionsIn(t *testing.T, line []byte, key string) []wireOpt {
	t.Helper()
	var m struct {
		Result struct {
			ConfigOptions []wireOpt `json:"configOptions"`
		} `json:"result"`
		Params struct {
			Update struct {
				ConfigOptions []wireOpt `json:"configOptions"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("decode %s: %v", clip(line), err)
	}
	if key == "result" {
		return m.Result.ConfigOptions
	}
	return m.Params.Update.ConfigOptions
}

// switchTo picks agent in the selector and returns the answer.
func (sp *switchPeer) switchTo(agent string) []byte {
	sp.t.Helper()
	_, resp := sp.request("session/set_config_option", map[string]any{"sessionId": sp.sid, "configId": "_sidecar_agent", "value": agent})
	mustSucceed(sp.t, "switch to "+agent, resp)
	sp.barrier()
	return resp
}

// prompts returns the prompts an agent's call log holds, as the texts of
// their blocks.
func prompts(t *testing.T, path string) [][]string {
	t.Helper()
	var out [][]string
	for _, c := range readCalls(t, path) {
		if c.Method != "session/prompt" {
			continue
		}
		var p struct {
			Prompt []struct {
				Text string `json:"text"`
			} `json:"prompt"`
		}
		if err := json.Unmarshal(c.Params, &p); err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, b := range p.Prompt {
			texts = append(texts, b.Text)
		}
		out = append(out, texts)
	}
	return out
}

func (sp *switchPeer) mustPrompt(text string) fakeagent.Reply {
	sp.t.Helper()
	resp, got, window := sp.prompt(text)
	mustSucceed(sp.t, "prompt "+text, resp)
	for _, l := range window {
		if u, ok := parseUpdate(l); ok && u.sessionID != sp.sid {
			sp.t.Fatalf("an update arrived under session %q, not the client's %q: %s", u.sessionID, sp.sid, clip(l))
		}
	}
	r, ok := fakeagent.ParseReply(got)
	if !ok {
		sp.t.Fatalf("no reply line for %q in %q", text, got)
	}
	sp.barrier()
	return r
}

func TestSwitchAgentsCarriesKeptTurns(t *testing.T) {
	sp := startSwitch(t)
	_, resp := sp.request("session/set_config_option", map[string]any{"sessionId": sp.sid, "configId": "model", "value": fakeagent.ModelDeep})
	mustSucceed(t, "set model", resp)
	if got := selectorValue(t, resp, "result"); got != "a" {
		t.Fatalf("set_config_option result selector = %q, want a", got)
	}
	_, resp = sp.request("session/set_mode", map[string]any{"sessionId": sp.sid, "modeId": "plan"})
	mustSucceed(t, "set mode", resp)
	for _, text := range []string{"one on a", "two on a", "three on a"} {
		if r := sp.mustPrompt(text); !strings.HasPrefix(r.Session, "a-") {
			t.Fatalf("%q ran in native session %q, want agent a's", text, r.Session)
		}
	}

	// Switch to b: b's options plus the selector, the mode carried, the
	// model named as not carried, and b's command list for its fresh
	// native session.
	lists := func() int {
		n := 0
		for _, l := range sp.lines() {
			if u, ok := parseUpdate(l); ok && u.kind == "available_commands_update" && strings.Contains(string(l), `"name":"agent"`) {
				n++
			}
		}
		return n
	}
	before := lists()
	resp = sp.switchTo("b")
	if lists() != before+1 {
		t.Fatalf("the switch brought %d command lists, want b's one", lists()-before)
	}
	var ids []string
	for _, o := range optionsIn(t, resp, "result") {
		ids = append(ids, o.ID)
	}
	if want := []string{"model", "effort", "mode", "verbosity", "_sidecar_agent"}; !slices.Equal(ids, want) {
		t.Fatalf("options after the switch = %v, want b's and the selector %v", ids, want)
	}
	if got := selectorValue(t, resp, "result"); got != "b" {
		t.Fatalf("selector after the switch = %q, want b", got)
	}
	if !strings.Contains(string(resp), "models never carry") || !strings.Contains(string(resp), `"mode=plan"`) {
		t.Fatalf("the answer does not say what carried: %s", clip(resp))
	}
	r := sp.mustPrompt("question for b")
	if !strings.HasPrefix(r.Session, "b-") || r.Mode != "plan" || r.Model != fakeagent.DefaultModel {
		t.Fatalf("b's reply = %+v, want b's session, mode plan carried, b's own default model", r)
	}
	got := prompts(t, sp.callsB)
	if len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("b got prompts %q, want one with the handoff ahead of the question", got)
	}
	handoff := got[0][0]
	for _, want := range []string{"one on a", "two on a", "three on a", "from agent a"} {
		if !strings.Contains(handoff, want) {
			t.Errorf("b's handoff lacks %q:\n%s", want, handoff)
		}
	}

	// A rewind on b, then back to a with the slash command: a's fresh
	// native session gets the turns kept on a and b, not the rewound one.
	sp.mustPrompt("rewound on b")
	resp, text, _ := sp.prompt("/rewind")
	mustSucceed(t, "/rewind", resp)
	if !strings.Contains(text, "rewound on b") {
		t.Fatalf("/rewind said %q", text)
	}
	sp.barrier()
	resp, text, _ = sp.prompt("/agent a")
	mustSucceed(t, "/agent a", resp)
	if !strings.Contains(text, "now runs on a (was b)") {
		t.Fatalf("/agent a said %q", text)
	}
	sp.barrier()
	r = sp.mustPrompt("back on a")
	if r.Session != "a-2" {
		t.Fatalf("back on a ran in %q, want a fresh native session a-2", r.Session)
	}
	got = prompts(t, sp.callsA)
	last := got[len(got)-1]
	if len(last) != 2 {
		t.Fatalf("a's prompt after the switch back = %q, want a handoff first", last)
	}
	for _, want := range []string{"one on a", "three on a", "question for b", "from agent b"} {
		if !strings.Contains(last[0], want) {
			t.Errorf("a's handoff lacks %q:\n%s", want, last[0])
		}
	}
	if strings.Contains(last[0], "rewound on b") {
		t.Errorf("a's handoff holds the rewound turn:\n%s", last[0])
	}
}

// agentProc finds the sidecar's agent whose command line holds marker.
func agentProc(t *testing.T, p *peer, marker string) proc {
	t.Helper()
	for _, k := range childrenOf(t, p.c.Pid()) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(k.pid) + "/cmdline")
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			return k
		}
	}
	t.Fatalf("no agent with %q among the sidecar's children", marker)
	return proc{}
}

func kill(t *testing.T, p *peer, a proc) {
	t.Helper()
	if err := syscall.Kill(a.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, fmt.Sprintf("agent %d to be replaced", a.pid), func() bool {
		_, _, start, _, ok := stat(a.pid)
		return !ok || start != a.start
	})
}

func TestSwitchAgentsCrashes(t *testing.T) {
	sp := startSwitch(t)
	_, resp := sp.request("session/set_mode", map[string]any{"sessionId": sp.sid, "modeId": "plan"})
	mustSucceed(t, "set mode", resp)
	sp.mustPrompt("one on a")
	sp.switchTo("b")
	sp.mustPrompt("two on b")

	// The agent the session left dies: nothing changes for the session.
	before := len(readCalls(t, sp.callsB))
	kill(t, sp.peer, agentProc(t, sp.peer, "-id-prefix a-"))
	waitFor(t, sp.peer, "a's restart", func() bool {
		return count(fakeagent.Methods(readCalls(t, sp.callsA)), "initialize") >= 2
	})
	r := sp.mustPrompt("three on b")
	if r.Session != "b-1" || r.Mode != "plan" {
		t.Fatalf("after a's crash, b's reply = %+v, want the same native session b-1 in plan", r)
	}
	if got := describeAll(readCalls(t, sp.callsB)[before:]); !slices.Equal(got, []string{"session/prompt"}) {
		t.Fatalf("b got %v after a's crash, want only the prompt (barriers go to the default agent)", got)
	}

	// The session's own agent dies: it recovers as after any crash, with
	// its config and the kept turns.
	kill(t, sp.peer, agentProc(t, sp.peer, "-id-prefix b-"))
	waitFor(t, sp.peer, "b's restart", func() bool {
		return count(fakeagent.Methods(readCalls(t, sp.callsB)), "initialize") >= 2
	})
	resp, text, _ := sp.prompt("four on b")
	mustSucceed(t, "the prompt after b's crash, which waits for b", resp)
	r, _ = fakeagent.ParseReply(text)
	// The restarted fake agent numbers its sessions from 1 again: its
	// first turn tells the rebuilt session apart.
	if r.Mode != "plan" || r.Turns != 1 {
		t.Fatalf("after b's crash the reply = %+v, want the first turn of a rebuilt session in plan", r)
	}
	got := prompts(t, sp.callsB)
	last := got[len(got)-1]
	if len(last) != 2 || !strings.Contains(last[0], "one on a") || !strings.Contains(last[0], "three on b") {
		t.Fatalf("b's prompt after its crash = %q, want the handoff of a's and b's turns", last)
	}
}

// promisedImage reads what an initialize response promises about images,
// and the agents it names.
func promisedImage(t *testing.T, init []byte) (image bool, agents []string) {
	t.Helper()
	var m struct {
		Result struct {
			AgentCapabilities struct {
				PromptCapabilities struct {
					Image bool `json:"image"`
				} `json:"promptCapabilities"`
				Meta struct {
					Sidecar struct {
						Agents []string `json:"agents"`
					} `json:"acp-sidecar"`
				} `json:"_meta"`
			} `json:"agentCapabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal(init, &m); err != nil {
		t.Fatalf("initialize: %s (%v)", clip(init), err)
	}
	return m.Result.AgentCapabilities.PromptCapabilities.Image, m.Result.AgentCapabilities.Meta.Sidecar.Agents
}

func TestSwitchAgentsCapabilities(t *testing.T) {
	stateDir, dir := t.TempDir(), t.TempDir()
	sp := startSwitchIn(t, stateDir, dir, "", "-no-image")
	if image, agents := promisedImage(t, sp.init); image || !slices.Equal(agents, []string{"a", "b"}) {
		t.Fatalf("initialize promised image=%v agents=%v, want no images (b takes none) and agents [a b]", image, agents)
	}
	imagePrompt := map[string]any{"sessionId": sp.sid, "prompt": []map[string]any{
		{"type": "text", "text": "look"}, {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
	}}
	_, resp := sp.request("session/prompt", imagePrompt)
	mustSucceed(t, "image prompt on a, which takes images", resp)
	sp.barrier()
	sp.switchTo("b")
	before := len(readCalls(t, sp.callsB))
	_, resp = sp.request("session/prompt", imagePrompt)
	if _, code, msg := decodeRPCError(t, resp); code != -32602 || !strings.Contains(msg, "agent b does not accept image content") {
		t.Fatalf("image prompt on b answered %d %q, want a clear refusal", code, msg)
	}
	if got := describeAll(readCalls(t, sp.callsB)[before:]); slices.Contains(got, "session/prompt") {
		t.Fatalf("the refused prompt reached b: %v", got)
	}
	if code := sp.finish(); code != 0 {
		t.Fatalf("sidecar exit status %d", code)
	}

	// The next run knows b's capabilities from the store: b is not
	// started to answer the client's initialize.
	os.Remove(sp.callsB)
	sp = startSwitchIn(t, stateDir, dir, "", "-no-image")
	if image, _ := promisedImage(t, sp.init); image {
		t.Fatalf("the second run promised images")
	}
	if _, err := os.Stat(sp.callsB); !os.IsNotExist(err) {
		t.Fatalf("b was started for the second run's initialize (%v)", err)
	}
}

func TestSwitchAgentsIdleStop(t *testing.T) {
	sp := startSwitch(t, "--agent-idle", "100ms")
	// b was started to learn what it supports; no session uses it.
	waitFor(t, sp.peer, "idle b to stop", func() bool { return len(childrenOf(t, sp.c.Pid())) == 1 })
	sp.mustPrompt("one on a")
	sp.switchTo("b")
	sp.mustPrompt("two on b")
	waitFor(t, sp.peer, "idle a to stop", func() bool { return len(childrenOf(t, sp.c.Pid())) == 1 })
	agentProc(t, sp.peer, "-id-prefix b-")

	// Back to a: it starts again, is initialized by the sidecar, and its
	// fresh session gets the kept turns. (a may also have been stopped
	// before the first session/new, on a slow machine.)
	inits := count(fakeagent.Methods(readCalls(t, sp.callsA)), "initialize")
	resp, text, _ := sp.prompt("/agent a")
	mustSucceed(t, "/agent a", resp)
	if !strings.Contains(text, "now runs on a") {
		t.Fatalf("/agent a said %q", text)
	}
	sp.barrier()
	if n := count(fakeagent.Methods(readCalls(t, sp.callsA)), "initialize"); n != inits+1 {
		t.Fatalf("a got %d initializes after /agent a, want 1: the sidecar's, after the restart", n-inits)
	}
	sp.mustPrompt("three on a")
	got := prompts(t, sp.callsA)
	if last := got[len(got)-1]; len(last) != 2 || !strings.Contains(last[0], "two on b") {
		t.Fatalf("a's prompt after its restart = %q, want the handoff first", last)
	}
}

func TestSwitchAgentsKeepRequestIDsApart(t *testing.T) {
	sp := startSwitch(t)
	onA := sp.sid
	_, resp := sp.request("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
	sp.sid = sessionIDFrom(t, resp)
	sp.switchTo("b")
	onB := sp.sid

	// Both agents ask the client at once; their own ids are alike.
	sp.send(`{"jsonrpc":"2.0","id":"pa","method":"session/prompt","params":{"sessionId":"`+onA+`","prompt":[{"type":"text","text":"ask permission"}]}}`,
		`{"jsonrpc":"2.0","id":"pb","method":"session/prompt","params":{"sessionId":"`+onB+`","prompt":[{"type":"text","text":"ask permission"}]}}`)
	isAsk := func(l []byte) bool { return strings.Contains(string(l), `"method":"session/request_permission"`) }
	first := sp.await("the first permission request", isAsk)
	second := sp.await("the second permission request", isAsk)
	if rawID(t, first) == rawID(t, second) {
		t.Fatalf("the client got two pending requests with id %s", rawID(t, first))
	}
	for _, ask := range [][]byte{first, second} {
		sp.send(`{"jsonrpc":"2.0","id":` + rawID(t, ask) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	}
	answered := map[string]bool{}
	for len(answered) < 2 {
		l := sp.await("the prompts' answers", func(l []byte) bool { return strings.Contains(string(l), `"result":{"stopReason"`) })
		answered[rawID(t, l)] = true
	}
	for _, sid := range []string{onA, onB} {
		found := false
		for _, l := range sp.lines() {
			if u, ok := parseUpdate(l); ok && u.sessionID == sid && strings.Contains(u.text, "permission=selected:allow") {
				found = true
			}
		}
		if !found {
			t.Errorf("session %s's agent did not get the client's answer", sid)
		}
	}
}

func TestSwitchAgentsSurfaces(t *testing.T) {
	sp := startSwitch(t)
	if !strings.Contains(string(sp.init), `"_sidecar/agent"`) {
		t.Fatalf("initialize does not advertise _sidecar/agent: %s", clip(sp.init))
	}
	// What the switchboard does not understand still gets its answer.
	resp := sp.call("7", `{"jsonrpc":"2.0","id":7,"method":`)
	if _, code, _ := decodeRPCError(t, resp); code != -32700 {
		t.Fatalf("a malformed line got %s, want a parse error", clip(resp))
	}
	_, resp = sp.request("_fake/echo", map[string]any{"x": 1})
	mustSucceed(t, "an extension method", resp)

	// /agent alone says where the session runs; an unknown agent is refused
	// and the session stays.
	resp, text, _ := sp.prompt("/agent")
	mustSucceed(t, "/agent", resp)
	if !strings.Contains(text, "runs on a. Agents: a, b.") {
		t.Fatalf("/agent said %q", text)
	}
	_, resp = sp.request("session/set_config_option", map[string]any{"sessionId": sp.sid, "configId": "_sidecar_agent", "value": "zed"})
	if _, code, msg := decodeRPCError(t, resp); code != -32602 || !strings.Contains(msg, `no agent named "zed"`) {
		t.Fatalf("a switch to an unknown agent answered %d %q", code, msg)
	}
	// A running turn keeps the session where it is.
	sp.send(`{"jsonrpc":"2.0","id":"h","method":"session/prompt","params":{"sessionId":"` + sp.sid + `","prompt":[{"type":"text","text":"hang"}]}}`)
	sp.await("the hanging prompt's notice", func(l []byte) bool { return strings.Contains(string(l), "waiting for session/cancel") })
	_, resp = sp.request("_sidecar/agent", map[string]any{"sessionId": sp.sid, "agent": "b"})
	if _, code, msg := decodeRPCError(t, resp); code != -32011 || !strings.Contains(msg, "a turn is running") {
		t.Fatalf("a switch during a turn answered %d %q", code, msg)
	}
	sp.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sp.sid + `"}}`)
	sp.await("the cancelled prompt", acpclient.HasID(`"h"`))
	sp.barrier()

	// The orchestrators' method moves it.
	_, resp = sp.request("_sidecar/agent", map[string]any{"sessionId": sp.sid, "agent": "b"})
	mustSucceed(t, "_sidecar/agent", resp)
	if got := selectorValue(t, resp, "result"); got != "b" {
		t.Fatalf("_sidecar/agent answered with the selector on %q", got)
	}
	sp.barrier()
	if r := sp.mustPrompt("on b"); !strings.HasPrefix(r.Session, "b-") {
		t.Fatalf("after _sidecar/agent the prompt ran in %q", r.Session)
	}
	// A command list from b carries /agent.
	found := false
	for _, l := range sp.lines() {
		if u, ok := parseUpdate(l); ok && u.kind == "available_commands_update" && strings.Contains(string(l), `"name":"agent"`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no command list offered /agent")
	}
}

// TestSwitchAgentsShutdown: with several agents, the editor's EOF and a
// signal to the sidecar alone stop every agent, even ones that ignore EOF,
// and the sidecar exits.
func TestSwitchAgentsShutdown(t *testing.T) {
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			sp := startSwitchIn(t, t.TempDir(), t.TempDir(), "", "-ignore-eof", "--grace", "200ms")
			sp.switchTo("b")
			tree := descendantsOf(t, sp.c.Pid())
			if len(tree) != 2 {
				t.Fatalf("agents %v, want a and b", tree)
			}
			if how == "eof" {
				if code := sp.finish(); code != 0 {
					t.Fatalf("exit status %d after EOF", code)
				}
			} else {
				if err := syscall.Kill(sp.c.Pid(), syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if _, err := sp.c.Wait(sp.ctx); err != nil {
					t.Fatalf("the sidecar did not exit on SIGTERM: %v", err)
				}
			}
			checkTreeGone(t, tree)
		})
	}
}

// TestSwitchAgentsLoadAfterRestart: an editor that comes back loads the
// session on the agent it last ran on, from the record.
func TestSwitchAgentsLoadAfterRestart(t *testing.T) {
	stateDir, dir := t.TempDir(), t.TempDir()
	sp := startSwitchIn(t, stateDir, dir, "", "")
	sp.mustPrompt("one on a")
	sp.switchTo("b")
	sp.mustPrompt("two on b")
	sid := sp.sid
	if code := sp.finish(); code != 0 {
		t.Fatalf("exit status %d", code)
	}

	// The fake agent numbers its sessions from 1 in each life: the second
	// run's own new session must not take the first one's id.
	sp = startSwitchIn(t, stateDir, dir, "-id-prefix second-a-", "")
	_, resp := sp.request("session/load", map[string]any{"sessionId": sid, "cwd": dir, "mcpServers": []any{}})
	mustSucceed(t, "session/load", resp)
	if got := selectorValue(t, resp, "result"); got != "b" {
		t.Fatalf("the loaded session's selector = %q, want b: %s", got, clip(resp))
	}
	sp.sid = sid
	sp.barrier()
	r := sp.mustPrompt("three on b")
	if !strings.HasPrefix(r.Session, "b-") {
		t.Fatalf("after the load the prompt ran in %q, want agent b", r.Session)
	}
}
