//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
	"github.com/acp-sidecar/acp-sidecar/conformance/remotetest"
)

// A sidecarSession is one client session through the sidecar, with the
// state directory known so the record can be read afterwards, and what it
// takes to start another sidecar on the same agent and state (reopen).
type sidecarSession struct {
	t     *testing.T
	a     *agent
	mock  *mockllm.Server
	argv  []string // the agent's command line, as the sidecar runs it
	env   []string // the agent's environment, which the sidecar passes on
	dir   string   // the sidecar's working directory
	state string   // the sidecar's --state-dir
	cwd   string   // the session's cwd
	sid   string   // the client's session id
	// proto is the ACP version the client speaks: 1, or 2 through a
	// sidecar that lets it (--max-protocol 2).
	proto int
	// transport is "" for the sidecar on the client's stdio, or "http" or
	// "ws": then srv is an `acp-sidecar serve` in front of the agent, and
	// the client's process is the ACP SDK's own transport client to it.
	transport string
	srv       *remotetest.Server
}

// startSession starts the sidecar around argv with env and a fresh state
// dir, and runs initialize and session/new in a fresh cwd. The session/new
// result is returned with it.
func startSession(t *testing.T, argv, env []string, mock *mockllm.Server) (*sidecarSession, json.RawMessage) {
	return startSessionIn(t, 1, argv, env, mock)
}

// startSessionIn is startSession for a client of ACP version proto.
func startSessionIn(t *testing.T, proto int, argv, env []string, mock *mockllm.Server) (*sidecarSession, json.RawMessage) {
	t.Helper()
	return startSessionVia(t, proto, "", argv, env, mock)
}

// startSessionVia is startSessionIn through serve over transport ("http" or
// "ws"), or on stdio ("").
func startSessionVia(t *testing.T, proto int, transport string, argv, env []string, mock *mockllm.Server) (*sidecarSession, json.RawMessage) {
	t.Helper()
	s := &sidecarSession{t: t, mock: mock, argv: argv, env: env, dir: t.TempDir(), state: t.TempDir(), cwd: t.TempDir(), proto: proto, transport: transport}
	if transport != "" {
		s.srv = remotetest.Start(t, remotetest.Options{
			Bin: sidecarBinary(t), Token: "e2e-" + transport, Env: env, StateDir: s.state,
			Flags: append(append([]string{}, sidecarBounds...), s.flags()...), Argv: argv,
		})
	}
	s.a = s.client(t)
	s.initialize(s.a)
	var res json.RawMessage
	s.sid, res = newSession(t, s.a, s.cwd)
	return s, res
}

// reopen starts a fresh sidecar for t on the session's agent, environment
// and state dir, as an editor started again does, and runs initialize. The
// sidecar before it must have exited: the state dir has one owner.
func (s *sidecarSession) reopen(t *testing.T) *sidecarSession {
	t.Helper()
	r := *s
	r.t = t
	r.a = r.client(t)
	r.initialize(r.a)
	return &r
}

// client starts what the session's client talks to: a sidecar on its
// stdio, or a new connection to the session's server (which outlives
// its connections, so a reopen is a new connection to it).
func (s *sidecarSession) client(t *testing.T) *agent {
	t.Helper()
	if s.srv == nil {
		return startSidecarState(t, s.argv, s.env, s.dir, s.state, s.flags()...)
	}
	argv, env := remotetest.SDKClientArgv(t, s.transport, s.srv.URL, s.srv.Token)
	a := startAgent(t, argv, append(append([]string{}, s.env...), env...), s.dir)
	t.Cleanup(func() {
		if !t.Failed() {
			checkSchema(t, a)
		}
	})
	return a
}

// flags are the sidecar's flags for the session's client.
func (s *sidecarSession) flags() []string {
	f := []string{"--grace", "1s"}
	if s.proto >= 2 {
		f = append(f, "--max-protocol", "2")
	}
	return f
}

// initialize runs initialize on a as the session's editor does, in its
// version.
func (s *sidecarSession) initialize(a *agent) {
	s.t.Helper()
	if s.proto < 2 {
		initializeAsEditor(s.t, a)
		return
	}
	res := step(s.t, a, "initialize", map[string]any{
		"protocolVersion": 2, "capabilities": map[string]any{},
		"info": map[string]string{"name": "acp-sidecar-e2e-v2", "version": "0"},
	})
	var init struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res.Result, &init); err != nil || init.ProtocolVersion != 2 {
		s.t.Fatalf("initialize in v2 through the sidecar: %s (%v), want protocolVersion 2", res.Result, err)
	}
}

// open is the session/load of a v1 client, and v2's session/resume with
// replayFrom, which replaces it.
func (s *sidecarSession) open() frame {
	s.t.Helper()
	if s.proto < 2 {
		return step(s.t, s.a, "session/load", map[string]any{"sessionId": s.sid, "cwd": s.cwd, "mcpServers": []any{}})
	}
	return step(s.t, s.a, "session/resume", map[string]any{"sessionId": s.sid, "cwd": s.cwd, "mcpServers": []any{}, "replayFrom": map[string]string{"type": "start"}})
}

// initializeAsEditor runs initialize as an editor with file access does.
func initializeAsEditor(t *testing.T, a *agent) {
	t.Helper()
	step(t, a, "initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": true, "writeTextFile": true},
			"terminal": false,
		},
		"clientInfo": map[string]string{"name": "acp-sidecar-e2e", "version": "0"},
	})
}

// openSession runs initialize and session/new, and returns the session id
// and the session/new result.
func openSession(t *testing.T, a *agent) (string, json.RawMessage) {
	t.Helper()
	initializeAsEditor(t, a)
	return newSession(t, a, t.TempDir())
}

// newSession runs session/new in cwd and returns the session id and the
// result.
func newSession(t *testing.T, a *agent, cwd string) (string, json.RawMessage) {
	t.Helper()
	res := step(t, a, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res.Result, &sess); err != nil || sess.SessionID == "" {
		t.Fatalf("session/new result %s: %v", res.Result, err)
	}
	return sess.SessionID, res.Result
}

// setOption sets a config option, checks the agent's answer took it, and
// returns the options the answer lists.
func (s *sidecarSession) setOption(id, value string) []configOption {
	s.t.Helper()
	params := map[string]any{"sessionId": s.sid, "configId": id, "value": value}
	if s.proto >= 2 {
		params["type"] = "id" // v2 says the value's type
	}
	res := step(s.t, s.a, "session/set_config_option", params)
	if got := currentValue(s.t, res.Result, id); got != value {
		s.t.Fatalf("set_config_option %s %q: result has %q: %s", id, value, got, res.Result)
	}
	return optionsOf(s.t, res.Result)
}

func (s *sidecarSession) setMode(mode string) {
	s.t.Helper()
	step(s.t, s.a, "session/set_mode", map[string]any{"sessionId": s.sid, "modeId": mode})
}

// promptCall sends one text prompt and returns the frame that ends its
// turn, or the error (an *rpcError for a JSON-RPC error response, or in
// v2 the error an idle state_update ended the turn with). In v1 the turn's
// end is the prompt's response; in v2 the response accepts the prompt
// with a messageId, and the turn ends with the session's idle
// state_update after it.
func (s *sidecarSession) promptCall(text string) (frame, error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), stepTimeout)
	defer cancel()
	n := s.a.frameCount()
	res, err := s.a.call(ctx, "session/prompt", map[string]any{
		"sessionId": s.sid, "prompt": []map[string]string{{"type": "text", "text": text}},
	})
	if err != nil || s.proto < 2 {
		return res, err
	}
	var acc struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal(res.Result, &acc); err != nil || acc.MessageID == "" {
		return res, fmt.Errorf("the v2 prompt was accepted with %s (%v), want a messageId", res.Result, err)
	}
	// The turn's end comes after its acceptance: an idle before it (a
	// resume's snapshot, while the prompt waited out a rebuild) ends
	// nothing of this prompt's.
	for i, f := range s.a.framesSince(n) {
		if bytes.Equal(f.Raw, res.Raw) {
			n += i + 1
			break
		}
	}
	end, err := s.a.waitFrame(ctx, n, func(f frame) bool {
		return f.Method == "session/update" && sessionOf(f) == s.sid && stateOf(f) == "idle"
	})
	if err != nil {
		return frame{}, fmt.Errorf("no idle state_update ended the turn: %w", err)
	}
	var u struct {
		Update struct {
			StopReason string    `json:"stopReason"`
			Error      *rpcError `json:"error"`
		} `json:"update"`
	}
	if err := json.Unmarshal(end.Params, &u); err != nil {
		return end, fmt.Errorf("the turn's end %s: %w", end.Raw, err)
	}
	if u.Update.StopReason == "error" {
		if u.Update.Error == nil {
			u.Update.Error = &rpcError{Message: "stopReason error without details"}
		}
		return end, u.Update.Error
	}
	return end, nil
}

// stateOf is the state a v2 state_update reports, "" for any other frame.
func stateOf(f frame) string {
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			State         string `json:"state"`
		} `json:"update"`
	}
	if json.Unmarshal(f.Params, &p) != nil || p.Update.SessionUpdate != "state_update" {
		return ""
	}
	return p.Update.State
}

// prompt sends one text prompt, requires stopReason end_turn, and returns
// the frames the client received until the turn's end, that included.
func (s *sidecarSession) prompt(text string) []frame {
	s.t.Helper()
	n := s.a.frameCount()
	res, err := s.promptCall(text)
	if err != nil {
		s.t.Fatalf("prompt %q: %v\nstderr:\n%s", text, err, s.a.stderr.String())
	}
	checkEndTurn(s.t, text, res)
	return s.a.framesSince(n)
}

// checkEndTurn requires the frame that ended a turn to say end_turn: a v1
// prompt's result, or a v2 idle state_update.
func checkEndTurn(t *testing.T, text string, res frame) {
	t.Helper()
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	raw := res.Result
	if res.Method == "session/update" {
		var p struct {
			Update json.RawMessage `json:"update"`
		}
		_ = json.Unmarshal(res.Params, &p) // a frame without it fails below
		raw = p.Update
	}
	if err := json.Unmarshal(raw, &pr); err != nil || pr.StopReason != "end_turn" {
		t.Fatalf("prompt %q: turn ended %s (%v), want stopReason end_turn", text, res.Raw, err)
	}
}

// turnRequest returns the one turn request (either API) the mock received
// whose last user text is text: the request of the turn that prompted it.
func (s *sidecarSession) turnRequest(text string) mockllm.Request {
	s.t.Helper()
	var found []mockllm.Request
	for _, r := range s.mock.TurnRequests() {
		if r.LastUserText() == text {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		var lasts []string
		for _, r := range s.mock.TurnRequests() {
			lasts = append(lasts, r.LastUserText())
		}
		s.t.Fatalf("mock saw %d requests for the prompt %q, want 1; last user texts: %q", len(found), text, lasts)
	}
	return found[0]
}

// status calls _sidecar/status for the session.
func (s *sidecarSession) status() sidecarStatus {
	s.t.Helper()
	res := step(s.t, s.a, "_sidecar/status", map[string]any{"sessionId": s.sid})
	var st sidecarStatus
	if err := json.Unmarshal(res.Result, &st); err != nil {
		s.t.Fatalf("_sidecar/status result %s: %v", res.Result, err)
	}
	return st
}

// sidecarStatus is the part of the `_sidecar/status` result the tests read.
type sidecarStatus struct {
	SessionID       string            `json:"sessionId"`
	NativeSessionID string            `json:"nativeSessionId"`
	NativeHistory   []string          `json:"nativeHistory"`
	Live            map[string]string `json:"live"`
	Turns           int               `json:"turns"`
	KeptTurns       int               `json:"keptTurns"`
}

// closeClient closes the sidecar's stdin, as an editor closing the session
// does, and waits for the sidecar to exit.
func (s *sidecarSession) closeClient() {
	s.t.Helper()
	if err := s.a.stdin.Close(); err != nil {
		s.t.Fatalf("close the sidecar's stdin: %v", err)
	}
	if !waitOrTimeout(s.a.exited, eofExitBound) {
		s.t.Fatalf("sidecar still running %v after its stdin was closed", eofExitBound)
	}
	s.t.Logf("sidecar exited: %v", s.a.waitErr)
}

// showRecord is the part of `acp-sidecar show SESSION --json` (docs/record.md, "The
// record") the tests read.
type showRecord struct {
	SessionID       string     `json:"sessionId"`
	NativeSessionID string     `json:"nativeSessionId"`
	NativeHistory   []string   `json:"nativeHistory"`
	Agent           []string   `json:"agent"`
	Baseline        *showLayer `json:"baseline"`
	Original        *showLayer `json:"original"`
	Live            *showLayer `json:"live"`
	Changed         []struct {
		OptionID string          `json:"optionId"`
		Category string          `json:"category"`
		Legacy   bool            `json:"legacy"`
		From     json.RawMessage `json:"from"`
		To       json.RawMessage `json:"to"`
	} `json:"changed"`
	Overrides []struct {
		OptionID string          `json:"optionId"`
		Category string          `json:"category"`
		Value    json.RawMessage `json:"value"`
	} `json:"overrides"`
	Blocked json.RawMessage `json:"blocked"`
	Handoff *struct {
		NativeSessionID string `json:"nativeSessionId"`
		Turn            int    `json:"turn"`
		Kept            int    `json:"kept"`
		Omitted         int    `json:"omitted"`
	} `json:"handoff"`
	Turns []struct {
		Index           int      `json:"index"`
		Status          string   `json:"status"`
		StopReason      string   `json:"stopReason"`
		Prompt          string   `json:"prompt"`
		Answer          string   `json:"answer"`
		Notices         []string `json:"notices"`
		Origin          string   `json:"origin"`
		Asked           []string `json:"asked"`
		NativeSessionID string   `json:"nativeSessionId"`
	} `json:"turns"`
}

// showLayer is one config layer of the record.
type showLayer struct {
	Values     map[string]json.RawMessage `json:"values"`
	Categories map[string]string          `json:"categories"`
	Mode       string                     `json:"mode"`
	Model      string                     `json:"model"`
}

// value returns the layer's value of option id as a string ("" if it is not
// a JSON string, or absent).
func (l *showLayer) value(id string) string {
	if l == nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(l.Values[id], &s) // absent or not a string: ""
	return s
}

// show runs `acp-sidecar show SID --json --state-dir DIR`, in the argument
// order docs/record.md gives, and decodes its output.
func (s *sidecarSession) show() showRecord {
	s.t.Helper()
	out, errOut, err := s.cli("show", s.sid, "--json")
	if err != nil {
		s.t.Fatalf("acp-sidecar show %s --json: %v\nstderr: %s\nstdout: %s", s.sid, err, errOut, out)
	}
	s.t.Logf("show --json: %s", out)
	var rec showRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		s.t.Fatalf("decode show --json output: %v\n%s", err, out)
	}
	return rec
}

// cli runs an acp-sidecar command on the session's state dir, as a user in
// a shell does, and returns its stdout, stderr and exit error.
func (s *sidecarSession) cli(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sidecarBinary(s.t), append(args, "--state-dir", s.state)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ACP_SIDECAR_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// checkSessionIDs asserts that every sessionId in what the client received
// (session/update and agent requests' params, and results) is the client's
// own: a rebuild must never show the client a native id.
func checkSessionIDs(t *testing.T, frames []frame, sid string) {
	t.Helper()
	seen := 0
	for _, f := range frames {
		for _, part := range []json.RawMessage{f.Params, f.Result} {
			var v struct {
				SessionID *string `json:"sessionId"`
			}
			if len(part) == 0 || json.Unmarshal(part, &v) != nil || v.SessionID == nil {
				continue
			}
			seen++
			if *v.SessionID != sid {
				t.Errorf("the client got sessionId %q, not its own %q: %s", *v.SessionID, sid, f.Raw)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no frame the client got carries a sessionId")
	}
	t.Logf("%d frames with a sessionId, all %s", seen, sid)
}

// agentPid returns the pid of the sidecar's live child that runs the
// agent's entry point. The agent must be running: nothing here waits.
func (s *sidecarSession) agentPid() int {
	s.t.Helper()
	sidecar := s.a.cmd.Process.Pid
	if s.srv != nil {
		sidecar = s.srv.Pid()
	}
	entry := s.argv[len(s.argv)-1]
	for _, pid := range descendantsOf(sidecar) {
		p, err := readProc(pid)
		if err == nil && p.ppid == sidecar && p.state != "Z" && strings.Contains(p.cmdline, entry) {
			return pid
		}
	}
	s.t.Fatalf("no child of the sidecar (pid %d) runs %s", sidecar, entry)
	return 0
}
