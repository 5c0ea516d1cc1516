package fakeagent_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

func v2Init(caps string) map[string]any {
	return map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "v2-test", "version": "1"},
		"capabilities": json.RawMessage(caps)}
}

func text(s string) []map[string]string { return []map[string]string{{"type": "text", "text": s}} }

// initV2 initializes c as a v2 client and reads the answer, and the auth
// notice after it if the agent sends one.
func initV2(t *testing.T, c *v2Client, caps string, authNotice bool) map[string]json.RawMessage {
	t.Helper()
	got := c.exchange("initialize", v2Init(caps))
	if diff := cmp.Diff([]string{"result"}, kindsOf(got)); diff != "" {
		t.Fatalf("initialize (-want +got):\n%s", diff)
	}
	var res map[string]json.RawMessage
	got[0].result(t, &res)
	if authNotice {
		if l, _ := c.next(); !bytes.Equal(append(l.Raw, '\n'), fakeagent.AuthStatusLine()) {
			t.Errorf("after initialize: %s, want the auth notice", l.Raw)
		}
	}
	return res
}

// newV2Session opens a session and reads up to its answer and the
// available_commands_update that follows it.
func newV2Session(t *testing.T, c *v2Client) (string, map[string]json.RawMessage) {
	t.Helper()
	got := c.exchange("session/new", map[string]any{"cwd": "/home/me"})
	var res map[string]json.RawMessage
	got[len(got)-1].result(t, &res)
	var sid string
	if err := json.Unmarshal(res["sessionId"], &sid); err != nil {
		t.Fatal(err)
	}
	if l, _ := c.next(); l.Kind != "available_commands_update" {
		t.Errorf("after session/new: %s, want available_commands_update", l.Raw)
	}
	return sid, res
}

// v2Options checks that opts are v2 SessionConfigOptions (configId, no
// id) and returns their ids and current values.
func v2Options(t *testing.T, raw json.RawMessage) ([]string, map[string]string) {
	t.Helper()
	var opts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &opts); err != nil {
		t.Fatalf("configOptions %s: %v", raw, err)
	}
	var ids []string
	current := map[string]string{}
	for _, o := range opts {
		if _, ok := o["id"]; ok {
			t.Errorf("option %s has v1's id", o["id"])
		}
		var id, cur string
		_ = json.Unmarshal(o["configId"], &id)
		_ = json.Unmarshal(o["currentValue"], &cur)
		ids = append(ids, id)
		current[id] = cur
	}
	return ids, current
}

// noLegacy checks a v2 session result has neither modes nor models.
func noLegacy(t *testing.T, what string, res map[string]json.RawMessage) {
	t.Helper()
	for _, k := range []string{"modes", "models"} {
		if _, ok := res[k]; ok {
			t.Errorf("%s result has v1's %s", what, k)
		}
	}
}

// turnText is the agent text of a turn's chunks.
func turnText(t *testing.T, ls []v2Line) string {
	t.Helper()
	var b strings.Builder
	for _, l := range ls {
		if l.Kind == "agent_message_chunk" {
			var c struct {
				Text string `json:"text"`
			}
			l.field(t, "content", &c)
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// prompt sends a v2 prompt and checks its insertion: user_message with the
// prompt's blocks, the answer {messageId} with the same id (UserMessageID
// of turn n), then running. It returns the lines after those, up to the
// turn's idle state_update.
func prompt(t *testing.T, c *v2Client, sid string, n int, words string) []v2Line {
	t.Helper()
	blocks := text(words)
	id := c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": blocks})
	head := []v2Line{}
	for range 3 {
		l, ok := c.next()
		if !ok {
			t.Fatalf("prompt %q: the output ended after %q", words, kindsOf(head))
		}
		head = append(head, l)
	}
	if diff := cmp.Diff([]string{"user_message", "result", "state running"}, kindsOf(head)); diff != "" {
		t.Fatalf("prompt %q insertion (-want +got):\n%s", words, diff)
	}
	want := fakeagent.UserMessageID(sid, n)
	if head[0].MessageID != want {
		t.Errorf("user_message messageId = %q, want UserMessageID(%s, %d) %q", head[0].MessageID, sid, n, want)
	}
	var content []map[string]string
	head[0].field(t, "content", &content)
	if diff := cmp.Diff(blocks, content); diff != "" {
		t.Errorf("user_message content (-want +got):\n%s", diff)
	}
	if !answers(id)(head[1]) {
		t.Errorf("second line %s, want the answer to the prompt", head[1].Raw)
	}
	var res struct {
		MessageID string `json:"messageId"`
	}
	head[1].result(t, &res)
	if res.MessageID != want {
		t.Errorf("prompt result messageId = %q, want the user_message's %q", res.MessageID, want)
	}
	return c.until(idle(sid))
}

// TestV2Lifecycle drives v2-current as a v2 client does, with raw v2
// frames, and checks each answer's shape and the order of the frames;
// every frame of the exchange is checked against the v2 schema too.
func TestV2Lifecycle(t *testing.T) {
	c := startV2(t, "-profile", "v2-current")

	// # initialize: v2's result, no v1 member
	res := initV2(t, c, `{}`, true)
	if diff := cmp.Diff([]string{"authMethods", "capabilities", "info", "protocolVersion"}, keys(res)); diff != "" {
		t.Errorf("initialize result members (-want +got):\n%s", diff)
	}
	if string(res["protocolVersion"]) != "2" || string(res["info"]) != `{"name":"fake-agent","version":"1"}` {
		t.Errorf("protocolVersion, info = %s, %s; want 2, fake-agent 1", res["protocolVersion"], res["info"])
	}
	var caps struct {
		Session map[string]json.RawMessage `json:"session"`
	}
	if err := json.Unmarshal(res["capabilities"], &caps); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"delete", "fork", "mcp", "prompt"}, keys(caps.Session)); diff != "" {
		t.Errorf("capabilities.session (-want +got):\n%s", diff)
	}
	if p, m := string(caps.Session["prompt"]), string(caps.Session["mcp"]); p != `{"image":{},"embeddedContext":{}}` || m != `{"stdio":{}}` {
		t.Errorf("capabilities.session prompt, mcp = %s, %s", p, m)
	}

	// # session/new: options by configId, no modes or models
	sid, res := newV2Session(t, c)
	noLegacy(t, "session/new", res)
	ids, _ := v2Options(t, res["configOptions"])
	if diff := cmp.Diff([]string{"model", "effort", "mode", "verbosity"}, ids); diff != "" {
		t.Errorf("configIds (-want +got):\n%s", diff)
	}

	// # set_config_option: type id works; boolean reaches the agent, which
	// has no boolean option; no type or another one is refused
	for _, set := range []struct{ id, value string }{{"mode", "plan"}, {"model", "deep-3"}} {
		got := c.exchange("session/set_config_option", map[string]any{"sessionId": sid, "configId": set.id, "type": "id", "value": set.value})
		var r map[string]json.RawMessage
		got[len(got)-1].result(t, &r)
		if _, cur := v2Options(t, r["configOptions"]); cur[set.id] != set.value {
			t.Errorf("after set %s %s: current %q", set.id, set.value, cur[set.id])
		}
	}
	for _, p := range []map[string]any{
		{"sessionId": sid, "configId": "fast", "type": "boolean", "value": true},
		{"sessionId": sid, "configId": "mode", "value": "ask"},
		{"sessionId": sid, "configId": "mode", "type": "other", "value": "ask"},
	} {
		var got []v2Line
		if p["type"] == "boolean" {
			got = c.exchange("session/set_config_option", p)
		} else {
			got = c.exchangeBad("session/set_config_option", p)
		}
		if diff := cmp.Diff([]string{"error -32602"}, kindsOf(got)); diff != "" {
			t.Errorf("set_config_option %v (-want +got):\n%s", p, diff)
		}
	}

	// # the methods v2 removed, answered as claude-agent-acp 0.101.0 does
	for _, m := range []string{"session/set_mode", "session/load", "session/set_model"} {
		got := c.exchangeBad(m, map[string]any{"sessionId": sid, "modeId": "ask", "modelId": "fast-1", "cwd": "/home/me", "mcpServers": []any{}})
		want := `{"code":-32601,"message":"\"Method not found\": ` + m + `","data":{"method":"` + m + `"}}`
		if len(got) != 1 || !bytes.Contains(got[0].Raw, []byte(`"error":`+want)) {
			t.Errorf("%s: %q, want error %s", m, kindsOf(got), want)
		}
	}

	// # a prompt: inserted and answered at once, then running, the turn,
	// and idle with the v1 stop reason
	turn := prompt(t, c, sid, 1, "hello")
	want := []string{"agent_message_chunk", "agent_message_chunk", "session_info_update", "usage_update", "state idle end_turn"}
	if diff := cmp.Diff(want, kindsOf(turn)); diff != "" {
		t.Errorf("turn 1 (-want +got):\n%s", diff)
	}
	for _, l := range turn[:2] {
		if l.MessageID != fakeagent.MessageID(sid, 1) {
			t.Errorf("chunk messageId = %q, want MessageID(%s, 1)", l.MessageID, sid)
		}
	}
	r, ok := fakeagent.ParseReply(turnText(t, turn))
	if !ok || r.Turns != 1 || r.Mode != "plan" || r.Model != "deep-3" {
		t.Errorf("reply %+v (%v), want turn 1 in plan mode on deep-3", r, ok)
	}

	// # a cancelled prompt ends idle, cancelled
	id := c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": text("hang")})
	hang := c.until(func(l v2Line) bool { return l.Kind == "agent_message_chunk" })
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	hang = append(hang, c.until(idle(sid))...)
	if diff := cmp.Diff([]string{"user_message", "result", "state running", "agent_message_chunk", "state idle cancelled"}, kindsOf(hang)); diff != "" {
		t.Errorf("hang, cancel (-want +got):\n%s", diff)
	}
	if !answers(id)(hang[1]) || hang[0].MessageID != fakeagent.UserMessageID(sid, 2) {
		t.Errorf("hang: %s, %s; want turn 2's insertion", hang[0].Raw, hang[1].Raw)
	}

	// # a v1 error after insertion ends the turn idle with stopReason
	// error; before it (no such session, no block) it is the answer
	turn = prompt(t, c, sid, 3, "switch mode nosuch")
	if diff := cmp.Diff([]string{"state idle error"}, kindsOf(turn)); diff != "" {
		t.Errorf("failed turn (-want +got):\n%s", diff)
	}
	var failure struct {
		Code int `json:"code"`
	}
	turn[0].field(t, "error", &failure)
	if failure.Code != -32602 {
		t.Errorf("idle error code = %d, want -32602", failure.Code)
	}
	for _, p := range []map[string]any{{"sessionId": "nope", "prompt": text("hi")}, {"sessionId": sid, "prompt": []any{}}} {
		var got []v2Line
		if p["sessionId"] == "nope" {
			got = c.exchange("session/prompt", p)
		} else {
			got = c.exchangeBad("session/prompt", p)
		}
		wantErr := "error -32002"
		if p["sessionId"] != "nope" {
			wantErr = "error -32602"
		}
		if diff := cmp.Diff([]string{wantErr}, kindsOf(got)); diff != "" {
			t.Errorf("prompt %v (-want +got):\n%s", p, diff)
		}
	}

	// # resume from the start: each message announced, then its chunks,
	// under the ids the live turns had; then idle, then the result
	got := c.exchange("session/resume", map[string]any{"sessionId": sid, "cwd": "/home/me", "replayFrom": map[string]string{"type": "start"}})
	var wantReplay []string
	for range 3 {
		wantReplay = append(wantReplay, "user_message", "user_message_chunk", "agent_message", "agent_message_chunk")
	}
	wantReplay = append(wantReplay, "state idle", "result")
	if diff := cmp.Diff(wantReplay, kindsOf(got)); diff != "" {
		t.Fatalf("resume from start (-want +got):\n%s", diff)
	}
	for n := 1; n <= 3; n++ {
		u, a := got[4*(n-1)], got[4*(n-1)+2]
		for _, l := range got[4*(n-1) : 4*n] {
			want := u.MessageID
			if strings.HasPrefix(l.Kind, "agent") {
				want = a.MessageID
			}
			if l.MessageID != want {
				t.Errorf("turn %d %s messageId %q, want its message's %q", n, l.Kind, l.MessageID, want)
			}
		}
		if u.MessageID != fakeagent.UserMessageID(sid, n) || a.MessageID != fakeagent.MessageID(sid, n) {
			t.Errorf("turn %d replayed as user %q, agent %q; want the live ids", n, u.MessageID, a.MessageID)
		}
		var content []any
		u.field(t, "content", &content)
		if content == nil || len(content) != 0 {
			t.Errorf("replayed user_message content = %v, want []", content)
		}
	}
	got[len(got)-1].result(t, &res)
	noLegacy(t, "session/resume", res)
	if _, cur := v2Options(t, res["configOptions"]); cur["mode"] != fakeagent.DefaultMode {
		t.Errorf("resumed mode = %q, want the default (resume resets config)", cur["mode"])
	}
	if l, _ := c.next(); l.Kind != "available_commands_update" {
		t.Errorf("after the resume: %s, want available_commands_update (as after load)", l.Raw)
	}

	// # resume without replay, and the ones refused
	got = c.exchange("session/resume", map[string]any{"sessionId": sid, "cwd": "/home/me"})
	if diff := cmp.Diff([]string{"state idle", "result"}, kindsOf(got)); diff != "" {
		t.Errorf("resume (-want +got):\n%s", diff)
	}
	for p, want := range map[string]string{
		`{"sessionId":"` + sid + `","cwd":"/home/me","replayFrom":{"type":"lastTurn"}}`: "error -32602",
		`{"sessionId":"nope","cwd":"/home/me","replayFrom":{"type":"start"}}`:           "error -32002",
	} {
		got := c.exchange("session/resume", json.RawMessage(p))
		if diff := cmp.Diff([]string{want}, kindsOf(got)); diff != "" {
			t.Errorf("resume %s (-want +got):\n%s", p, diff)
		}
	}

	// # the other session methods keep v1's logic
	got = c.exchange("session/list", map[string]any{})
	var list struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
		} `json:"sessions"`
	}
	got[len(got)-1].result(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid {
		t.Errorf("session/list = %s", got[len(got)-1].Result)
	}
	got = c.exchange("session/fork", map[string]any{"sessionId": sid, "cwd": "/home/me"})
	got[len(got)-1].result(t, &res)
	noLegacy(t, "session/fork", res)
	v2Options(t, res["configOptions"])
	for _, m := range []string{"session/close", "session/delete"} {
		if got := c.exchange(m, map[string]any{"sessionId": sid}); string(got[len(got)-1].Result) != "{}" {
			t.Errorf("%s: %s, want {}", m, got[len(got)-1].Raw)
		}
	}
	got = c.exchange("session/resume", map[string]any{"sessionId": sid, "cwd": "/home/me"})
	if diff := cmp.Diff([]string{"error -32002"}, kindsOf(got)); diff != "" {
		t.Errorf("resume after delete (-want +got):\n%s", diff)
	}

	// # nothing of v1 on the wire: no mode updates, no chunk without id
	c.mu.Lock()
	lines := append([][]byte(nil), c.lines...)
	c.mu.Unlock()
	for _, raw := range lines {
		l := parseV2Line(t, raw)
		if l.Kind == "current_mode_update" || l.Kind == "tool_call" || bytes.Contains(raw, []byte(`"agentCapabilities"`)) {
			t.Errorf("v1 on the wire: %s", raw)
		}
		if strings.HasSuffix(l.Kind, "_chunk") && l.MessageID == "" {
			t.Errorf("chunk without messageId: %s", raw)
		}
	}
}

// TestV2Versions: the client's initialize decides. Under -v2 a client
// that asks for 2 or more gets 2; one that asks for 1 gets v1's answer;
// without -v2 every client gets v1.
func TestV2Versions(t *testing.T) {
	for _, tt := range []struct {
		args []string
		ask  int
		want string
	}{
		{[]string{"-v2"}, 2, "2"},
		{[]string{"-v2"}, 3, "2"},
		{[]string{"-profile", "v2-current"}, 1, "1"},
		{nil, 2, "1"},
		{[]string{"-profile", "claude-current"}, 2, "1"},
	} {
		t.Run(fmtArgs(tt.args)+" asks "+string(rune('0'+tt.ask)), func(t *testing.T) {
			c := startV2(t, tt.args...)
			p := v2Init(`{}`)
			p["protocolVersion"] = tt.ask
			send := c.exchange
			if tt.want == "1" {
				// v1's InitializeRequest has other members; the schema
				// checks v2 only.
				send = c.exchangeBad
				p["clientCapabilities"] = map[string]any{}
			}
			got := send("initialize", p)
			var res map[string]json.RawMessage
			got[len(got)-1].result(t, &res)
			if string(res["protocolVersion"]) != tt.want {
				t.Errorf("protocolVersion = %s, want %s", res["protocolVersion"], tt.want)
			}
			_, v1 := res["agentCapabilities"]
			_, v2 := res["capabilities"]
			if v1 != (tt.want == "1") || v2 != (tt.want == "2") {
				t.Errorf("result members %q, want v%s's", keys(res), tt.want)
			}
			if tt.want == "1" {
				// The schema checks v2 frames; this exchange is v1.
				c.mu.Lock()
				c.wire = nil
				c.mu.Unlock()
			}
		})
	}
}

// TestV2Baseline: session/resume (with and without replay), session/list
// and session/close are baseline in v2, served whatever -resume, -list,
// -close and -load say; the capabilities say only what the flags add.
func TestV2Baseline(t *testing.T) {
	c := startV2(t, "-profile", "no-load", "-v2")
	res := initV2(t, c, `{}`, false)
	var caps struct {
		Session map[string]json.RawMessage `json:"session"`
	}
	if err := json.Unmarshal(res["capabilities"], &caps); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"mcp", "prompt"}, keys(caps.Session)); diff != "" {
		t.Errorf("capabilities.session (-want +got):\n%s", diff)
	}
	sid, res := newV2Session(t, c)
	noLegacy(t, "session/new", res)
	prompt(t, c, sid, 1, "hello")
	got := c.exchange("session/resume", map[string]any{"sessionId": sid, "cwd": "/home/me", "replayFrom": map[string]string{"type": "start"}})
	if diff := cmp.Diff([]string{"user_message", "user_message_chunk", "agent_message", "agent_message_chunk", "state idle", "result"}, kindsOf(got)); diff != "" {
		t.Errorf("resume from start without -load (-want +got):\n%s", diff)
	}
	c.until(func(l v2Line) bool { return l.Kind == "available_commands_update" })
	for _, m := range []string{"session/resume", "session/list", "session/close"} {
		got := c.exchange(m, map[string]any{"sessionId": sid, "cwd": "/home/me"})
		if l := got[len(got)-1]; l.Error != nil {
			t.Errorf("%s: %s", m, l.Raw)
		}
	}
}

// TestV2Quirks: the prompt quirks work in v2, and every frame they make is
// v2 (the schema check at the end): chunks written raw or outside a turn
// get a messageId, v1's tool_call becomes tool_call_update, a permission
// request has v2's title and subject, and "crash now" ends the process
// mid-turn with no idle.
func TestV2Quirks(t *testing.T) {
	c := startV2(t, "-profile", "v2-current", "-subagents", "-notices", "-compaction", "-resume-notes")
	initV2(t, c, `{"subagents":{}}`, true)
	sid, _ := newV2Session(t, c)

	n := 0
	run := func(words string) []v2Line {
		n++
		return prompt(t, c, sid, n, words)
	}
	turn := run("meta")
	if !bytes.Contains(turn[0].Raw, []byte(`12345678901234567890`)) || !bytes.Contains(turn[0].Raw, []byte(`<>&`)) ||
		turn[0].MessageID != fakeagent.MessageID(sid, n) {
		t.Errorf("meta chunk %s: want MetaLine's bytes with turn %d's messageId", turn[0].Raw, n)
	}
	for _, words := range []string{"unknown update", "ext", "echo: <b>&", "stream 2 3", fakeagent.NoticeTrigger + " " + fakeagent.CompactTrigger} {
		turn = run(words)
		if l := turn[len(turn)-1]; l.Stop != "end_turn" {
			t.Errorf("%q ended %s", words, l.Raw)
		}
	}

	// A permission request, answered: v2's shape, and the reply says so
	// (the v2 client has no fs, so nothing is read).
	for _, words := range []string{"ask permission", "subagent"} {
		n++
		c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": text(words)})
		got := c.until(func(l v2Line) bool { return l.Method == "session/request_permission" })
		req := got[len(got)-1]
		var p map[string]json.RawMessage
		if err := json.Unmarshal(req.Params, &p); err != nil {
			t.Fatal(err)
		}
		if _, ok := p["toolCall"]; ok || !bytes.HasPrefix(p["subject"], []byte(`{"toolCall":`)) || len(p["title"]) == 0 {
			t.Errorf("%q: permission request %s, want v2's title and subject", words, req.Params)
		}
		c.answer(req.ID, `{"outcome":{"outcome":"selected","optionId":"allow"}}`)
		got = append(got, c.until(idle(sid))...)
		r, ok := fakeagent.ParseReply(turnText(t, got))
		if !ok || r.Extra["permission"] != "selected:allow" {
			t.Errorf("%q reply %+v, want permission selected:allow", words, r)
		}
		if words == "ask permission" && r.Extra["read"] != "skipped" {
			t.Errorf("read = %q, want skipped: a v2 client has no fs", r.Extra["read"])
		}
		if words == "subagent" && r.Extra["subagent"] != fakeagent.SubagentPrefix+"1" {
			t.Errorf("subagent = %q, want %s1 (the client advertised subagents)", r.Extra["subagent"], fakeagent.SubagentPrefix)
		}
	}

	// A resume note goes out before the result, as a message of its own.
	got := c.exchange("session/resume", map[string]any{"sessionId": sid, "cwd": "/home/me"})
	if diff := cmp.Diff([]string{"agent_message_chunk", "state idle", "result"}, kindsOf(got)); diff != "" {
		t.Errorf("resume with a note (-want +got):\n%s", diff)
	}
	for i := 1; i <= n; i++ {
		if got[0].MessageID == fakeagent.MessageID(sid, i) {
			t.Errorf("the resume note has turn %d's messageId", i)
		}
	}

	got = nil
	c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": text("crash now")})
	for {
		l, ok := c.next()
		if !ok {
			break
		}
		got = append(got, l)
	}
	if diff := cmp.Diff([]string{"user_message", "result", "state running", "agent_message_chunk"}, kindsOf(got)); diff != "" {
		t.Errorf("crash now (-want +got):\n%s", diff)
	}
	if code := c.exitCode(); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
}

// TestV2State: a restarted agent with the same -state replays the turns
// of its earlier life under the ids they had, and numbers the next turn
// after them.
func TestV2State(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	c := startV2(t, "-profile", "v2-current", "-state", state)
	initV2(t, c, `{}`, true)
	sid, _ := newV2Session(t, c)
	prompt(t, c, sid, 1, "hello")
	c.in.Close()
	if code := c.exitCode(); code != 0 {
		t.Fatalf("exit status %d at stdin EOF", code)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatal(err)
	}

	c = startV2(t, "-profile", "v2-current", "-state", state)
	initV2(t, c, `{}`, true)
	got := c.exchange("session/resume", map[string]any{"sessionId": sid, "cwd": "/home/me", "replayFrom": map[string]string{"type": "start"}})
	if len(got) < 4 || got[0].MessageID != fakeagent.UserMessageID(sid, 1) || got[2].MessageID != fakeagent.MessageID(sid, 1) {
		t.Fatalf("replay after a restart: %q, want turn 1 under its ids", kindsOf(got))
	}
	c.until(func(l v2Line) bool { return l.Kind == "available_commands_update" })
	prompt(t, c, sid, 2, "again")
}

// TestV2BigLine: a prompt too long for the SDK is answered in v2 too: its
// result gains a messageId, and the turn is inserted, runs and ends.
func TestV2BigLine(t *testing.T) {
	c := startV2(t, "-profile", "v2-current", "-max-sdk-line", "4096")
	initV2(t, c, `{}`, true)
	sid, _ := newV2Session(t, c)
	c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": text(strings.Repeat("x", 8192))})
	got := c.until(idle(sid))
	if diff := cmp.Diff([]string{"user_message", "result", "state running", "state idle end_turn"}, kindsOf(got)); diff != "" {
		t.Fatalf("big prompt (-want +got):\n%s", diff)
	}
	var res struct {
		MessageID string `json:"messageId"`
		Blocks    int    `json:"blocks"`
	}
	got[1].result(t, &res)
	if res.MessageID == "" || res.MessageID != got[0].MessageID || res.Blocks != 1 {
		t.Errorf("big prompt result %s, user_message %s", got[1].Result, got[0].Raw)
	}
}

// TestV1UnchangedByV2: a v1 client gets the same bytes from v2-current as
// from claude-current, which differs only by -v2: the adapter stays out of
// a v1 connection, as a proxy that is transparent must.
func TestV1UnchangedByV2(t *testing.T) {
	script := func(profile string) [][]byte {
		a := start(t, acpclient.Options{}, "-profile", profile, "-notices")
		s, ctx := a.session(t)
		sid := s.SessionId
		if _, err := a.SetConfigOption(ctx, sid, "mode", "plan"); err != nil {
			t.Fatal(err)
		}
		if err := a.SetMode(ctx, sid, "ask"); err != nil {
			t.Fatal(err)
		}
		a.reply(ctx, t, sid, "hello "+fakeagent.NoticeTrigger)
		a.reply(ctx, t, sid, "ask permission")
		if _, err := a.Resume(ctx, sid, "/home/me"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Load(ctx, sid, "/home/me"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.List(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Fork(ctx, sid, "/home/me"); err != nil {
			t.Fatal(err)
		}
		deleteSession(t, a, sid)
		if _, err := a.Resume(ctx, sid, "/home/me"); acpclient.Code(err) != -32002 {
			t.Errorf("resume after delete: %v", err)
		}
		return a.Lines()
	}
	v1, v2 := script("claude-current"), script("v2-current")
	if !slices.EqualFunc(v1, v2, bytes.Equal) {
		t.Errorf("a v1 client got other bytes from v2-current:\n%s", cmp.Diff(toStrings(v1), toStrings(v2)))
	}
}

func toStrings(ls [][]byte) []string {
	var out []string
	for _, l := range ls {
		out = append(out, string(l))
	}
	return out
}
