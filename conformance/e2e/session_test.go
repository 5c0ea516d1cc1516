//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
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
}

// startSession starts the sidecar around argv with env and a fresh state
// dir, and runs initialize and session/new in a fresh cwd. The session/new
// result is returned with it.
func startSession(t *testing.T, argv, env []string, mock *mockllm.Server) (*sidecarSession, json.RawMessage) {
	t.Helper()
	s := &sidecarSession{t: t, mock: mock, argv: argv, env: env, dir: t.TempDir(), state: t.TempDir(), cwd: t.TempDir()}
	s.a = startSidecarState(t, argv, env, s.dir, s.state, "--grace", "1s")
	initializeAsEditor(t, s.a)
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
	r.a = startSidecarState(t, s.argv, s.env, s.dir, s.state, "--grace", "1s")
	initializeAsEditor(t, r.a)
	return &r
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
	res := step(s.t, s.a, "session/set_config_option", map[string]any{"sessionId": s.sid, "configId": id, "value": value})
	if got := currentValue(s.t, res.Result, id); got != value {
		s.t.Fatalf("set_config_option %s %q: result has %q: %s", id, value, got, res.Result)
	}
	return optionsOf(s.t, res.Result)
}

func (s *sidecarSession) setMode(mode string) {
	s.t.Helper()
	step(s.t, s.a, "session/set_mode", map[string]any{"sessionId": s.sid, "modeId": mode})
}

// promptCall sends one text prompt and returns the response frame, or the
// error (an *rpcError for a JSON-RPC error response).
func (s *sidecarSession) promptCall(text string) (frame, error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), stepTimeout)
	defer cancel()
	return s.a.call(ctx, "session/prompt", map[string]any{
		"sessionId": s.sid, "prompt": []map[string]string{{"type": "text", "text": text}},
	})
}

// prompt sends one text prompt, requires stopReason end_turn, and returns
// the frames the client received until the response, the response included.
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

func checkEndTurn(t *testing.T, text string, res frame) {
	t.Helper()
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(res.Result, &pr); err != nil || pr.StopReason != "end_turn" {
		t.Fatalf("prompt %q: result %s (%v), want stopReason end_turn", text, res.Result, err)
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
