package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// transparencyScript is one ACP exchange, written line by line as exact bytes.
// Each step waits for its response (and the barrier after it), so the run is
// deterministic even though the fake agent answers requests concurrently.
func transparencyScript(p *peer) {
	t := p.t
	wantIn := func(what string, line []byte, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !bytes.Contains(line, []byte(s)) {
				t.Errorf("%s: %s lacks %q", what, clip(line), s)
			}
		}
	}

	// initialize: id 0, members in an odd order, unknown members at every
	// level, _meta with a 20-digit integer and escapes an SDK would change.
	init := p.call(`0`, `{"id":0,"method":"initialize","jsonrpc":"2.0","params":{"protocolVersion":1,`+
		`"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":false,"x-future":{"n":1e400,"s":"\u00e9\ud83d\ude00"}},`+
		`"clientInfo":{"name":"transparency","version":"1"},"_meta":{"big":12345678901234567890,"html":"<>&\u003c/script\u003e"}},"x-top-level":[1,2.50,-0]}`)
	wantIn("initialize", init, `"protocolVersion":1`)
	p.barrier()

	// session/new: id -6, white space everywhere, a '\r' before the newline.
	sess := p.call(`-6`, " { \"jsonrpc\" : \"2.0\" ,\t\"id\" : -6 , \"method\":\"session/new\" , "+
		`"params" : { "cwd" : "/home/me/fake-cwd" , "mcpServers" : [ ] , "x-unknown" : null } }`+"\r")
	wantIn("session/new", sess, `"sessionId":"fake-sess-1"`)
	p.barrier()

	// Config: a string id, then the config-option and legacy model surfaces,
	// and a rejected value (its error passes through too).
	p.call(`"mode-1"`, `{"jsonrpc":"2.0","id":"mode-1","method":"session/set_mode","params":{"sessionId":"fake-sess-1","modeId":"plan"}}`)
	p.await("current_mode_update", acpclient.Contains(`"current_mode_update"`))
	p.barrier()
	p.call(`7`, `{"jsonrpc":"2.0","id":7,"method":"session/set_config_option","params":{"sessionId":"fake-sess-1","configId":"model","value":"deep-3"}}`)
	p.barrier()
	p.call(`8`, `{"params":{"modelId":"fast-1","sessionId":"fake-sess-1"},"method":"session/set_model","id":8,"jsonrpc":"2.0"}`)
	p.barrier()
	bad := p.call(`9`, `{"jsonrpc":"2.0","id":9,"method":"session/set_config_option","params":{"sessionId":"fake-sess-1","configId":"mode","value":"no-such-mode"}}`)
	wantIn("rejected set_config_option", bad, `"error"`)
	p.barrier()

	// Prompts: plain, with client _meta, and the quirks that make the agent
	// write raw _meta, an update kind no SDK knows, and an extension
	// notification.
	p.call(`10`, `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"hello \u2603 <>&"}],"_meta":{"trace":99999999999999999999,"x":{"y":[]}}}}`)
	p.barrier()
	from := p.seen
	p.call(`11`, `{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"meta"}]}}`)
	wantIn("meta prompt", p.find(from, "fake-agent meta"), "12345678901234567890", `"html":"<>&"`)
	p.barrier()
	p.call(`12`, `{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"unknown update"}]}}`)
	p.barrier()
	p.call(`13`, `{"jsonrpc":"2.0","id":13,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"ext"}]}}`)
	p.barrier()

	// Extensions and the unknown: an echo request with a unicode string id,
	// an unknown request (its -32601 passes through), an unknown
	// notification, a request with a null id, and a response nobody asked for.
	echo := p.call(`"echo-\u00e9"`, `{"jsonrpc":"2.0","id":"echo-\u00e9","method":"_fake/echo","params":{"a":12345678901234567890,"s":"<>&","nested":{"z":1,"a":[true,null]}}}`)
	wantIn("_fake/echo", echo, `"nested"`)
	p.barrier()
	unknown := p.call(`14`, `{"jsonrpc":"2.0","id":14,"method":"vendor/unknown_method","params":{"q":1}}`)
	wantIn("unknown method", unknown, `-32601`)
	p.send(`{"jsonrpc":"2.0","method":"vendor/notice","params":{"x":1}}`,
		`{"jsonrpc":"2.0","id":null,"method":"_fake/echo","params":{"null-id":true}}`,
		`{"jsonrpc":"2.0","id":999,"result":{"unsolicited":true}}`)
	p.barrier()

	// Agent→client requests while a prompt is pending, answered by the script.
	p.send(`{"jsonrpc":"2.0","id":15,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"ask permission"}]}}`)
	perm := p.await("session/request_permission", acpclient.HasMethod("session/request_permission"))
	p.send(`{"jsonrpc":"2.0","id":` + rawID(t, perm) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	read := p.await("fs/read_text_file", acpclient.HasMethod("fs/read_text_file"))
	p.send(`{"result":{"content":"line one\n<>&\n"},"id":` + rawID(t, read) + `,"jsonrpc":"2.0"}`)
	from = p.seen
	p.await("response 15", acpclient.HasID(`15`))
	wantIn("ask permission", p.find(from, "permission="), "permission=selected:allow", "read=ok:")
	p.barrier()

	// Cancellation: $/cancel_request, then session/cancel, each while a
	// prompt hangs.
	p.send(`{"jsonrpc":"2.0","id":16,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"hang"}]}}`)
	p.await("hang notice", acpclient.Contains("fake-agent waiting for session/cancel"))
	cancelled := p.call(`16`, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":16}}`)
	wantIn("$/cancel_request", cancelled, `"stopReason":"cancelled"`)
	p.barrier()
	p.send(`{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"hang"}]}}`)
	p.await("hang notice", acpclient.Contains("fake-agent waiting for session/cancel"))
	cancelled = p.call(`17`, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"fake-sess-1"}}`)
	wantIn("session/cancel", cancelled, `"stopReason":"cancelled"`)
	p.barrier()

	// Streaming: small chunks, then two of 1 MiB each, across every buffer
	// boundary on the way. (TestBigLines sends 20 MiB each way.)
	p.call(`18`, `{"jsonrpc":"2.0","id":18,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"stream 3 100"}]}}`)
	p.barrier()
	from = p.seen
	p.call(`19`, `{"jsonrpc":"2.0","id":19,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"stream 2 1048576"}]}}`)
	big := 0
	for _, l := range p.lines()[from:p.seen] {
		if len(l) >= 1<<20 {
			big++
		}
	}
	if big != 2 {
		t.Errorf("prompt 19: %d of its %d lines hold 1 MiB or more, want the 2 chunks of 1 MiB", big, p.seen-from)
	}
	p.barrier()

}

// TestTransparency runs the same exchange directly against the fake agent
// and through the sidecar, and compares the bytes each side received: the
// agent's stdin must equal what the client wrote, and the client's stdin
// must equal what the agent wrote, byte for byte, both ways
// (DESIGN.md "Data flow" 3, STYLE.md: the gopls forwarder check). It runs
// once on the fake agent's defaults and once with today's agents' habits:
// an `_auth/status_update` with no session id after initialize, a
// messageId on every chunk, session_info_update and usage_update with a
// cost (agents.md, "The packages editors install today").
func TestTransparency(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"defaults", nil},
		{"today's habits", []string{"-auth-notice", "-message-ids", "-info-updates"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testTransparency(t, tc.flags) })
	}
}

func testTransparency(t *testing.T, agentFlags []string) {
	type run struct {
		sent, clientGot, agentGot, agentWrote []byte
		stderr                                string
	}
	exchange := func(t *testing.T, sidecar bool) run {
		dir := t.TempDir()
		inLog, outLog := filepath.Join(dir, "agent.in"), filepath.Join(dir, "agent.out")
		agent := append([]string{"acp-sidecar", "fakeagent", "-stdin-log", inLog, "-stdout-log", outLog}, agentFlags...)
		argv := agent
		if sidecar {
			argv = sidecarArgv(t, nil, agent...)
		}
		var stderr acpclient.Buffer
		p := startPeer(boundedCtx(t), t, &stderr, argv...)
		transparencyScript(p)
		if code := p.finish(); code != 0 {
			t.Errorf("exit status %d after stdin EOF, want 0; stderr:\n%s", code, stderr.String())
		}
		return run{
			sent:       p.sent.Bytes(),
			clientGot:  p.c.Output(),
			agentGot:   mustReadFile(t, inLog),
			agentWrote: mustReadFile(t, outLog),
			stderr:     stderr.String(),
		}
	}
	direct := exchange(t, false)
	via := exchange(t, true)
	// ACP_SIDECAR_TEST_DUMP=DIR keeps both runs' streams for a closer look.
	if d := os.Getenv("ACP_SIDECAR_TEST_DUMP"); d != "" {
		_ = os.WriteFile(filepath.Join(d, "direct.out"), direct.clientGot, 0o600)
		_ = os.WriteFile(filepath.Join(d, "via.out"), via.clientGot, 0o600)
		_ = os.WriteFile(filepath.Join(d, "direct.in"), direct.agentGot, 0o600)
		_ = os.WriteFile(filepath.Join(d, "via.in"), via.agentGot, 0o600)
	}
	if t.Failed() {
		return
	}

	// The agent must receive exactly what the client wrote.
	for _, c := range []struct {
		name      string
		want, got []byte
	}{
		{"agent received (direct) = client wrote", direct.sent, direct.agentGot},
		{"agent received (sidecar) = client wrote", via.sent, via.agentGot},
		{"client received (direct) = agent wrote", direct.agentWrote, direct.clientGot},
	} {
		if d := diffStreams(c.want, c.got); d != "" {
			t.Errorf("%s: %s", c.name, d)
		}
	}
	// The client must receive exactly what the agent wrote, but for the
	// sidecar's documented additions.
	for _, c := range []struct {
		name      string
		want, got []byte
	}{
		{"client received (sidecar) vs agent wrote", via.agentWrote, via.clientGot},
		{"client received: sidecar vs direct", direct.clientGot, via.clientGot},
	} {
		n, err := matchWithAdditions(c.want, c.got)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		t.Logf("%s: %d frames carry the sidecar's additions", c.name, n)
	}
	for i, l := range bytes.Split(bytes.TrimSuffix(via.clientGot, []byte("\n")), []byte("\n")) {
		if !json.Valid(l) {
			t.Errorf("client line %d is not JSON: %s", i+1, clip(l))
		}
	}
}

// TestBigLines sends a 20 MiB prompt to the agent and a 20 MiB line to the
// client, through the relay alone (--record=false: what the recorder does
// with such a turn is its own concern, and slow under -race). Both arrive
// byte for byte, and the lines after them too.
func TestBigLines(t *testing.T) {
	dir := t.TempDir()
	bigText := strings.Repeat("0123456789abcdef", 20<<20/16)
	prompt := `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"` + bigText + `"}]}}`
	// The agent is a shell: it writes a prepared 20 MiB frame to its
	// stdout, then a small one, and copies its stdin to a file. It keeps
	// its stdout open until it exits, as agents do: the relay takes the
	// end of the agent's output for the end of the agent (no exec of cat
	// with stdout redirected, which closed it early and made the sidecar
	// stop reading the client's last frame).
	toClient := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + bigText + `"}}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"after","params":{}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "to-client"), []byte(toClient), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startPeer(boundedCtx(t), t, nil, sidecarArgv(t, []string{"--record=false"},
		"sh", "-c", `cd "$0" && cat to-client && cat > got`, dir)...)
	p.send(prompt, `{"jsonrpc":"2.0","method":"after","params":{}}`)
	p.await("the line after the big one", acpclient.HasMethod("after"))
	if code := p.finish(); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if d := diffStreams([]byte(toClient), p.c.Output()); d != "" {
		t.Errorf("client received: %s", d)
	}
	if d := diffStreams(p.sent.Bytes(), mustReadFile(t, filepath.Join(dir, "got"))); d != "" {
		t.Errorf("agent received: %s", d)
	}
}

// matchWithAdditions checks that got is want, line for line and byte for
// byte, except for what the sidecar adds to the agent's frames (DESIGN.md
// "Data flow" 2 and "Surfaces"): frames of its own, and additions that leave
// every byte of the agent's frame in place. sidecarAddition lists them. It
// returns how many lines carried additions.
func matchWithAdditions(want, got []byte) (int, error) {
	split := func(b []byte) [][]byte {
		if len(b) == 0 {
			return nil
		}
		return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	}
	w, g := split(want), split(got)
	i, added := 0, 0
	for j := range g {
		if i < len(w) && bytes.Equal(w[i], g[j]) {
			i++
			continue
		}
		gv, own, err := decodeStripped(g[j])
		if err != nil {
			return added, fmt.Errorf("line %d: %v: %s", j+1, err, clip(g[j]))
		}
		added++
		if own {
			continue
		}
		if i >= len(w) {
			return added, fmt.Errorf("line %d is extra: %s", j+1, clip(g[j]))
		}
		wv, _, err := decodeStripped(w[i])
		if err != nil {
			return added, fmt.Errorf("agent line %d: %v", i+1, err)
		}
		for _, d := range jsonDiff("", wv, gv) {
			if !sidecarAddition(d) {
				return added, fmt.Errorf("line %d: %s is not one of the sidecar's additions:\nagent  %s\nclient %s", j+1, d, clip(w[i]), clip(g[j]))
			}
		}
		// Additions only: the agent's bytes are all there, in order.
		orig := bytes.ReplaceAll(w[i], []byte(`"loadSession":false`), []byte(`"loadSession":true`))
		if !isSubsequence(orig, g[j]) {
			return added, fmt.Errorf("line %d: a rewrite changed the agent's bytes, not only added to them:\nagent  %s\nclient %s", j+1, clip(w[i]), clip(g[j]))
		}
		i++
	}
	if i < len(w) {
		return added, fmt.Errorf("%d agent lines never reached the client, from %s", len(w)-i, clip(w[i]))
	}
	return added, nil
}

// sidecarAddition reports whether a difference between an agent frame and
// what the client got is one the sidecar makes on purpose: its capability
// advertisement in the initialize result, and the session capabilities and
// loadSession it emulates where the agent lacks them. (Its slash commands
// in available_commands_update are taken out by decodeStripped.)
func sidecarAddition(d string) bool {
	for _, ok := range []string{
		"added .result.agentCapabilities._meta",
		"added .result.agentCapabilities._meta.acp-sidecar",
		"added .result.agentCapabilities.loadSession",
		"changed .result.agentCapabilities.loadSession: false -> true",
	} {
		if d == ok {
			return true
		}
	}
	return strings.HasPrefix(d, "added .result.agentCapabilities.sessionCapabilities.")
}

// decodeStripped decodes a frame, keeping numbers as written, and takes the
// sidecar's slash commands (described "acp-sidecar: …") out of an
// available_commands_update. own reports a frame that held nothing else.
func decodeStripped(line []byte) (v any, own bool, err error) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, false, err
	}
	params, _ := v.(map[string]any)["params"].(map[string]any)
	if u, _ := params["update"].(map[string]any); u != nil && u["sessionUpdate"] == "available_commands_update" {
		cmds, _ := u["availableCommands"].([]any)
		kept := []any{}
		for _, c := range cmds {
			if desc, _ := c.(map[string]any)["description"].(string); !strings.HasPrefix(desc, "acp-sidecar:") {
				kept = append(kept, c)
			}
		}
		u["availableCommands"] = kept
		own = len(kept) == 0 && len(cmds) > 0
	}
	return v, own, nil
}

// jsonDiff lists where b differs from a: "added PATH", "removed PATH" or
// "changed PATH: A -> B".
func jsonDiff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k, av := range am {
			if bv, ok := bm[k]; ok {
				out = append(out, jsonDiff(path+"."+k, av, bv)...)
			} else {
				out = append(out, "removed "+path+"."+k)
			}
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, "added "+path+"."+k)
			}
		}
		return out
	}
	if cmp.Equal(a, b) {
		return nil
	}
	return []string{fmt.Sprintf("changed %s: %v -> %v", path, a, b)}
}

// isSubsequence reports whether every byte of a appears in b, in order.
func isSubsequence(a, b []byte) bool {
	for _, c := range a {
		i := bytes.IndexByte(b, c)
		if i < 0 {
			return false
		}
		b = b[i+1:]
	}
	return true
}

// TestMalformedClientLine checks DESIGN.md "Data flow" 5: a client line that
// is not JSON, or not UTF-8, gets a -32700 parse error from the sidecar,
// never reaches the agent, and the relay goes on. The error carries the
// request's own id when the id can still be read (the editor waits for an
// answer under it), else id null.
func TestMalformedClientLine(t *testing.T) {
	tests := []struct {
		name, line, id string
	}{
		{"not JSON", `hello agent`, "null"},
		{"truncated", `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{`, "5"},
		{"invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"_fake/echo\",\"params\":{\"s\":\"\xff\xfe\"}}", "6"},
		{"invalid UTF-8 outside JSON", "\xc3\x28", "null"},
		{"two values", `{"jsonrpc":"2.0","id":7,"method":"_fake/echo"} {}`, "7"},
		{"trailing comma", `{"jsonrpc":"2.0","id":8,"method":"_fake/echo",}`, "8"},
		{"NUL byte", "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"_fake/echo\x00\"}", "9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inLog := filepath.Join(t.TempDir(), "agent.in")
			p := startPeer(boundedCtx(t), t, nil, sidecarArgv(t, nil, "acp-sidecar", "fakeagent", "-stdin-log", inLog)...)
			first := `{"jsonrpc":"2.0","id":1,"method":"_fake/echo","params":{"before":true}}`
			last := `{"jsonrpc":"2.0","id":2,"method":"_fake/echo","params":{"after":true}}`
			p.call(`1`, first)
			p.send(tt.line)
			errLine := p.await("parse error", acpclient.Contains(`"error"`))
			id, code, msg := decodeRPCError(t, errLine)
			if id != tt.id || code != -32700 || msg == "" {
				t.Errorf("answer = id %s, code %d, message %q; want id %s, code -32700 and a message", id, code, msg, tt.id)
			}
			p.call(`2`, last) // the relay still works
			if code := p.finish(); code != 0 {
				t.Errorf("exit status %d, want 0", code)
			}
			if got, want := string(mustReadFile(t, inLog)), first+"\n"+last+"\n"; got != want {
				t.Errorf("agent received %q, want only the valid lines %q", got, want)
			}
			if n := len(p.lines()); n != 3 {
				t.Errorf("client got %d lines, want 3 (two answers, one parse error):\n%s", n, lastLines(p.lines(), 5))
			}
		})
	}
}

// TestFrameOverLimit checks --max-frame: an oversized request gets an error
// with its own id from the sidecar, an oversized notification is dropped,
// an oversized agent line is dropped, and nothing else is lost either way.
func TestFrameOverLimit(t *testing.T) {
	const limit = 1 << 20
	pad := strings.Repeat("x", limit)
	inLog := filepath.Join(t.TempDir(), "agent.in")
	var stderr acpclient.Buffer
	p := startPeer(boundedCtx(t), t, &stderr, sidecarArgv(t, []string{"--max-frame", fmt.Sprint(limit)},
		"acp-sidecar", "fakeagent", "-stdin-log", inLog)...)
	var kept []string
	keep := func(id, line string) {
		t.Helper()
		kept = append(kept, line)
		p.call(id, line)
	}
	keep(`1`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	keep(`2`, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)

	// A request over the limit, its id first.
	p.send(`{"jsonrpc":"2.0","id":"big-1","method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"` + pad + `"}]}}`)
	id, code, msg := decodeRPCError(t, p.await("error for big-1", acpclient.HasID(`"big-1"`)))
	if id != `"big-1"` || code != -32600 || !strings.Contains(msg, "--max-frame") {
		t.Errorf("oversized request: id %s, code %d, message %q; want its id, -32600 and a message naming --max-frame", id, code, msg)
	}
	keep(`3`, `{"jsonrpc":"2.0","id":3,"method":"_fake/echo","params":{"after":"big-1"}}`)

	// A notification over the limit: nothing to answer, nothing lost.
	p.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"fake-sess-1","pad":"` + pad + `"}}`)
	keep(`4`, `{"jsonrpc":"2.0","id":4,"method":"_fake/echo","params":{"after":"big notification"}}`)

	// The agent writes a chunk over the limit: it is dropped, and the
	// prompt's other updates and its response still arrive.
	before := len(p.lines())
	keep(`5`, `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"stream 1 2000000"}]}}`)
	for _, l := range p.lines()[before:] {
		if len(l) > limit {
			t.Errorf("client got a %d-byte line over --max-frame", len(l))
		}
	}
	if got := len(p.lines()) - before; got != 3 {
		t.Errorf("prompt 5 gave %d lines, want 3 (two reply chunks and the response)", got)
	}
	keep(`6`, `{"jsonrpc":"2.0","id":6,"method":"_fake/echo","params":{"after":"big agent line"}}`)

	if code := p.finish(); code != 0 {
		t.Errorf("exit status %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if got, want := string(mustReadFile(t, inLog)), strings.Join(kept, "\n")+"\n"; got != want {
		t.Errorf("agent received:\n%s\nwant only the frames under the limit:\n%s", clip([]byte(got)), want)
	}
	for i, l := range p.lines() {
		if !json.Valid(l) {
			t.Errorf("client line %d is not JSON: %s", i+1, clip(l))
		}
	}
}

// TestFrameOverLimitIDLast is TestFrameOverLimit's request with its id after
// a params member that is larger than what the sidecar keeps of an oversized
// line. The client still needs an answer with its id, or it waits forever.
func TestFrameOverLimitIDLast(t *testing.T) {
	const limit = 1 << 20
	p := startPeer(boundedCtx(t), t, nil, sidecarArgv(t, []string{"--max-frame", fmt.Sprint(limit)}, "acp-sidecar", "fakeagent")...)
	p.send(`{"jsonrpc":"2.0","method":"_fake/echo","params":{"pad":"` + strings.Repeat("x", limit) + `"},"id":"big-last"}`)
	p.call(`1`, `{"jsonrpc":"2.0","id":1,"method":"_fake/echo","params":{}}`)
	for _, l := range p.lines() {
		if bytes.Contains(l, []byte(`"big-last"`)) {
			return
		}
	}
	regression(t, "proxy: only the first 64 KiB of an oversized line is scanned for its id",
		"no answer with id \"big-last\" for an oversized request whose id comes last; the client would wait forever; got:\n%s", lastLines(p.lines(), 5))
}

// TestOversizedClientResponse: the client answers the agent's
// fs/read_text_file with a result over --max-frame. The agent waits for that
// response, so it must get an error in its place, as the client does for an
// oversized agent response.
func TestOversizedClientResponse(t *testing.T) {
	const limit = 1 << 20
	p := startPeer(boundedCtx(t), t, nil, sidecarArgv(t, []string{"--max-frame", fmt.Sprint(limit)}, "acp-sidecar", "fakeagent")...)
	p.call(`1`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	p.call(`2`, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"ask permission"}]}}`)
	perm := p.await("session/request_permission", acpclient.HasMethod("session/request_permission"))
	p.send(`{"jsonrpc":"2.0","id":` + rawID(t, perm) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	read := p.await("fs/read_text_file", acpclient.HasMethod("fs/read_text_file"))
	p.send(`{"jsonrpc":"2.0","id":` + rawID(t, read) + `,"result":{"content":"` + strings.Repeat("x", limit) + `"}}`)
	from := p.seen
	p.await("response 3", acpclient.HasID(`3`))
	if reply := p.find(from, "read="); !bytes.Contains(reply, []byte("read=error:")) {
		t.Errorf("prompt reply %s: want read=error:… (the agent got an error in place of the dropped response)", clip(reply))
	}
}
