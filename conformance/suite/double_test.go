//go:build linux

package suite

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A double is a tiny relay that breaks one promise, put in front of the
// sidecar (between the suite's client and the sidecar) or in front of the
// agent (between the sidecar and the fake agent). It is this test binary
// run as `TESTBIN -suite-double RULE -- COMMAND ARGS...`: it starts
// COMMAND, relays its stdin and stdout line by line, and lets RULE drop,
// rewrite, answer or add frames. In front of the sidecar it also runs the
// CLI commands (show, sessions) for the checks, and may rewrite their
// output or the sidecar's --trace. The failing-target tests
// (fail_test.go) run each check against one.

const doubleFlag = "-suite-double"

// doubleState is what a rule may keep and use while the relay runs.
type doubleState struct {
	arg string // RULE's text after its name and a colon

	mu      sync.Mutex
	reqs    map[string]envelope // requests that went down, by raw id
	seen    map[string]bool     // what the rule noted
	options map[string]json.RawMessage
	toUp    func([]byte)
	toDown  func([]byte)
}

// rule is one double's behaviour. down sees each line travelling from the
// parent to the child, up each line from the child to the parent; each
// returns the line to pass on (nil: drop it). trace rewrites the sidecar's
// --trace line by line (nil: the trace is left alone); cli rewrites the
// output of a CLI command.
type rule struct {
	down  func(d *doubleState, e envelope, line []byte) []byte
	up    func(d *doubleState, e envelope, line []byte) []byte
	trace func(d *doubleState, line []byte) [][]byte
	cli   func(args []string, out []byte) []byte
}

// doubleSidecar returns an exe for config.exe: the real sidecar with a
// double running rule in front of it.
func doubleSidecar(dir, real, rule string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "sidecar-double")
	script := fmt.Sprintf("#!/bin/sh\nexec %q %s %q -- %q \"$@\"\n", self, doubleFlag, rule, real)
	return path, os.WriteFile(path, []byte(script), 0o755)
}

// doubleAgent returns an agent command with a double running rule in front
// of argv.
func doubleAgent(rule string, argv ...string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return append([]string{self, doubleFlag, rule, "--"}, argv...), nil
}

// throughDoubles is sidecarProcess for the tests: a run whose process is a
// double is the double's child.
func throughDoubles(pid int) int {
	argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return pid
	}
	if a := bytes.Split(argv, []byte{0}); len(a) > 1 && string(a[1]) == doubleFlag {
		if kids := childrenOf(pid); len(kids) == 1 {
			return kids[0]
		}
	}
	return pid
}

// runDouble is the double's main: args are RULE -- COMMAND ARGS....
func runDouble(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "suite double: usage: -suite-double RULE -- COMMAND ARGS...")
		return 2
	}
	name, arg, _ := strings.Cut(args[0], ":")
	ru, ok := doubleRules()[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "suite double: no rule %q\n", name)
		return 2
	}
	argv := args[2:]
	if len(argv) > 1 && slices.Contains([]string{"show", "sessions", "handoff"}, argv[1]) {
		return doubleCLI(ru, argv)
	}
	d := &doubleState{arg: arg, reqs: map[string]envelope{}, seen: map[string]bool{}, options: map[string]json.RawMessage{}}
	if ru.trace != nil {
		if i := slices.Index(argv, "--trace"); i >= 0 && i+1 < len(argv) {
			fifo := argv[i+1] + ".fifo"
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				fmt.Fprintf(os.Stderr, "suite double: %v\n", err)
				return 1
			}
			go relayTrace(d, ru, fifo, argv[i+1])
			argv = slices.Clone(argv)
			argv[i+1] = fifo
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "suite double: %v\n", err)
		return 1
	}
	var upMu, downMu sync.Mutex
	d.toUp = func(l []byte) {
		upMu.Lock()
		defer upMu.Unlock()
		_, _ = os.Stdout.Write(append(l, '\n'))
	}
	d.toDown = func(l []byte) {
		downMu.Lock()
		defer downMu.Unlock()
		_, _ = stdin.Write(append(l, '\n'))
	}
	go func() {
		relayLines(os.Stdin, func(line []byte) {
			e := peek(line)
			if e.Method != "" && e.hasID() {
				d.mu.Lock()
				d.reqs[string(e.ID)] = e
				d.mu.Unlock()
			}
			if ru.down != nil {
				line = ru.down(d, e, line)
			}
			if line != nil {
				d.toDown(line)
			}
		})
		stdin.Close()
	}()
	relayLines(stdout, func(line []byte) {
		if ru.up != nil {
			line = ru.up(d, peek(line), line)
		}
		if line != nil {
			d.toUp(line)
		}
	})
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// relayLines calls f with each line of r, without its newline, of any
// length.
func relayLines(r io.Reader, f func([]byte)) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			f(bytes.TrimSuffix(line, []byte("\n")))
		}
		if err != nil {
			return
		}
	}
}

func peek(line []byte) envelope {
	var e envelope
	_ = json.Unmarshal(line, &e) // a line that is not JSON peeks as nothing
	return e
}

// relayTrace copies the sidecar's trace from the fifo it writes to the
// path the check reads, line by line through the rule.
func relayTrace(d *doubleState, ru rule, fifo, path string) {
	in, err := os.Open(fifo) // blocks until the sidecar opens it
	if err != nil {
		return
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer out.Close()
	relayLines(in, func(line []byte) {
		for _, l := range ru.trace(d, line) {
			_, _ = out.Write(append(l, '\n'))
		}
	})
}

// doubleCLI runs a CLI command and passes its output through the rule.
func doubleCLI(ru rule, argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if ru.cli != nil && err == nil {
		out = ru.cli(argv[1:], out)
	}
	_, _ = os.Stdout.Write(out)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// request is the request that went down with the response e's id.
func (d *doubleState) request(e envelope) envelope {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reqs[string(e.ID)]
}

// rewriteResult applies f to the decoded result of a response.
func rewriteResult(line []byte, f func(res map[string]any)) []byte {
	m := decodeFrame(line)
	res, ok := m["result"].(map[string]any)
	if !ok {
		return line
	}
	f(res)
	return marshalPlain(m)
}

func errorLine(id json.RawMessage, code int, msg string) []byte {
	return marshalPlain(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func resultLine(id json.RawMessage, result any) []byte {
	return marshalPlain(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// lastText is a prompt request's last text block.
func lastText(e envelope) string {
	var p struct {
		Prompt []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if e.Method != "session/prompt" || json.Unmarshal(e.Params, &p) != nil || len(p.Prompt) == 0 {
		return ""
	}
	return strings.TrimSpace(p.Prompt[len(p.Prompt)-1].Text)
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ownRequest reports whether a request is one of the sidecar's own.
func ownRequest(e envelope) bool {
	var id string
	return json.Unmarshal(e.ID, &id) == nil && strings.HasPrefix(id, "acp-sidecar:")
}

// doubleRules are the rules by name. A rule that takes an argument gets it
// after a colon (answer:session/close).
func doubleRules() map[string]rule {
	// responseTo rewrites the result of responses to method.
	responseTo := func(method string, f func(d *doubleState, req envelope, res map[string]any)) rule {
		return rule{up: func(d *doubleState, e envelope, line []byte) []byte {
			if req := d.request(e); e.Method == "" && e.hasID() && req.Method == method {
				return rewriteResult(line, func(res map[string]any) { f(d, req, res) })
			}
			return line
		}}
	}
	return map[string]rule{
		// refuse:METHOD answers METHOD with an internal error and never
		// passes it on.
		"refuse": {down: func(d *doubleState, e envelope, line []byte) []byte {
			if e.Method == d.arg && e.hasID() {
				d.toUp(errorLine(e.ID, -32603, "refused by the suite's double"))
				return nil
			}
			return line
		}},
		// answer:METHOD answers METHOD with {} and never passes it on;
		// answer:/TEXT does so for a prompt whose last block is /TEXT,
		// with stopReason end_turn.
		"answer": {down: func(d *doubleState, e envelope, line []byte) []byte {
			switch {
			case strings.HasPrefix(d.arg, "/") && lastText(e) == d.arg:
				d.toUp(resultLine(e.ID, map[string]any{"stopReason": "end_turn"}))
				return nil
			case e.Method == d.arg && e.hasID():
				d.toUp(resultLine(e.ID, map[string]any{}))
				return nil
			}
			return line
		}},
		"init-version": responseTo("initialize", func(_ *doubleState, _ envelope, res map[string]any) { res["protocolVersion"] = "1" }),
		"new-no-id":    responseTo("session/new", func(_ *doubleState, _ envelope, res map[string]any) { delete(res, "sessionId") }),
		"list-empty":   responseTo("session/list", func(_ *doubleState, _ envelope, res map[string]any) { res["sessions"] = []any{} }),
		"fork-parent-id": responseTo("session/fork", func(_ *doubleState, req envelope, res map[string]any) {
			res["sessionId"] = sessionIDOf(req.Params)
		}),
		"cancel-refusal": responseTo("session/prompt", func(_ *doubleState, _ envelope, res map[string]any) {
			if res["stopReason"] == "cancelled" {
				res["stopReason"] = "refusal"
			}
		}),
		"set-partial": responseTo("session/set_config_option", func(_ *doubleState, req envelope, res map[string]any) {
			var p struct {
				ConfigID string `json:"configId"`
			}
			_ = json.Unmarshal(req.Params, &p)
			opts, _ := res["configOptions"].([]any)
			var kept []any
			for _, o := range opts {
				if om, _ := o.(map[string]any); om["id"] == p.ConfigID {
					kept = append(kept, o)
				}
			}
			res["configOptions"] = kept
		}),
		// id-unquote turns ids that are strings of digits into numbers,
		// as a relay that parses ids as numbers would.
		"id-unquote": {up: func(_ *doubleState, e envelope, line []byte) []byte {
			var s string
			if e.Method == "" && json.Unmarshal(e.ID, &s) == nil && s != "" && strings.Trim(s, "0123456789") == "" {
				m := decodeFrame(line)
				m["id"] = json.Number(s)
				return marshalPlain(m)
			}
			return line
		}},
		"alter-text": {up: func(_ *doubleState, e envelope, line []byte) []byte {
			if e.Method != "session/update" {
				return line
			}
			m := decodeFrame(line)
			if up := updateOf(m); up != nil && up["sessionUpdate"] == "agent_message_chunk" {
				if c, ok := up["content"].(map[string]any); ok {
					c["text"] = fmt.Sprint(c["text"]) + " (altered)"
				}
				return marshalPlain(m)
			}
			return line
		}},
		// fresh-ids, in front of the agent, makes it an agent that makes
		// up ids: a fresh messageId on each chunk, and a usage_update and a
		// session_info_update with fresh figures and a time before each
		// prompt's answer, as claude-agent-acp 0.101.0, codex-acp 2.6.0
		// and opencode do. Nothing the sidecar does is broken.
		"fresh-ids": {up: func(d *doubleState, e envelope, line []byte) []byte {
			switch req := d.request(e); {
			case e.Method == "session/update":
				m := decodeFrame(line)
				if up := updateOf(m); up != nil && up["sessionUpdate"] == "agent_message_chunk" {
					up["messageId"] = randomID()
					return marshalPlain(m)
				}
			case e.Method == "" && req.Method == "session/prompt":
				sid := sessionIDOf(req.Params)
				var n [2]byte
				_, _ = rand.Read(n[:])
				d.toUp(marshalPlain(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": sid,
					"update": map[string]any{"sessionUpdate": "usage_update", "used": int(n[0]) * 100, "size": 200000,
						"cost": map[string]any{"amount": float64(n[1]) / 1000, "currency": "USD"}}}}))
				d.toUp(marshalPlain(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": sid,
					"update": map[string]any{"sessionUpdate": "session_info_update", "title": "ses_" + randomID()[:8] + "xx",
						"updatedAt": time.Now().UTC().Format(time.RFC3339Nano)}}}))
			}
			return line
		}},
		// send-unoffered, in front of the sidecar, sends the value the
		// fail-closed check must never see reach the agent, as a client's
		// set_config_option, once the session is open.
		"send-unoffered": {up: func(d *doubleState, e envelope, line []byte) []byte {
			if e.Method == "" && e.hasID() && string(e.ID) == `"double-1"` {
				return nil // the answer to our own request
			}
			if req := d.request(e); req.Method == "session/new" {
				var r struct {
					SessionID string `json:"sessionId"`
				}
				_ = json.Unmarshal(e.Result, &r)
				d.toUp(line)
				d.toDown(marshalPlain(map[string]any{"jsonrpc": "2.0", "id": "double-1", "method": "session/set_config_option",
					"params": map[string]any{"sessionId": r.SessionID, "configId": "model", "value": notOffered}}))
				return nil
			}
			return line
		}},
		// handoff-again puts a handoff block ahead of every prompt after
		// the first one that follows /rewind: the handoff delivered twice.
		"handoff-again": {down: func(d *doubleState, e envelope, line []byte) []byte {
			if e.Method != "session/prompt" {
				return line
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			switch {
			case lastText(e) == "/rewind":
				d.seen["rewind"] = true
			case d.seen["rewind"] && !d.seen["first"]:
				d.seen["first"] = true
			case d.seen["first"]:
				m := decodeFrame(line)
				p := m["params"].(map[string]any)
				p["prompt"] = append([]any{map[string]any{"type": "text", "text": handoffHeader + " (a second time)"}}, p["prompt"].([]any)...)
				return marshalPlain(m)
			}
			return line
		}},
		// lie-from-life:N:PATH, in front of the agent: the agent
		// processes started with the same PATH count their lives (PATH.1,
		// PATH.2, …), and from the Nth life on the double answers the
		// sidecar's set_* calls with success and never passes them on, so
		// a restore in that life leaves the agent on its defaults.
		"lie-from-life": lying(func(d *doubleState, _ envelope) bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			if _, ok := d.seen["counted"]; !ok {
				d.seen["counted"] = true
				from, path, _ := strings.Cut(d.arg, ":")
				n, _ := strconv.Atoi(from)
				life := 1
				for ; life < 100; life++ {
					f, err := os.OpenFile(fmt.Sprintf("%s.%d", path, life), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
					if err == nil {
						f.Close()
						break
					}
				}
				d.seen["lie"] = life >= n
			}
			return d.seen["lie"]
		}),
		// lie-after-reopen does the same once a session/load or
		// session/resume went to the agent.
		"lie-after-reopen": lying(func(d *doubleState, e envelope) bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			if e.Method == "session/load" || e.Method == "session/resume" {
				d.seen["reopened"] = true
			}
			return d.seen["reopened"]
		}),
		// drop-commands-after:METHOD drops every available_commands_update
		// once a METHOD request went down.
		"drop-commands-after": {
			down: func(d *doubleState, e envelope, line []byte) []byte {
				if e.Method == d.arg {
					d.mu.Lock()
					d.seen["after"] = true
					d.mu.Unlock()
				}
				return line
			},
			up: func(d *doubleState, e envelope, line []byte) []byte {
				d.mu.Lock()
				after := d.seen["after"]
				d.mu.Unlock()
				if m := decodeFrame(line); after && m != nil {
					if up := updateOf(m); up != nil && up["sessionUpdate"] == "available_commands_update" {
						return nil
					}
				}
				return line
			},
		},
		// drop-replay drops the agent's messages a session/load replays.
		"drop-replay": {
			down: func(d *doubleState, e envelope, line []byte) []byte {
				if e.Method == "session/load" {
					d.mu.Lock()
					d.seen["loading"] = true
					d.mu.Unlock()
				}
				return line
			},
			up: func(d *doubleState, e envelope, line []byte) []byte {
				req := d.request(e)
				d.mu.Lock()
				defer d.mu.Unlock()
				if req.Method == "session/load" {
					d.seen["loading"] = false
				}
				if m := decodeFrame(line); d.seen["loading"] && m != nil {
					if up := updateOf(m); up != nil && up["sessionUpdate"] == "agent_message_chunk" {
						return nil
					}
				}
				return line
			},
		},
		// hostile-id answers the hostile check's invalid UTF-8 frame with
		// id null, as a relay that gives up on the whole line would.
		"hostile-id": {up: func(_ *doubleState, e envelope, line []byte) []byte {
			if e.Method == "" && string(e.ID) == `"hostile-2"` {
				m := decodeFrame(line)
				m["id"] = nil
				return marshalPlain(m)
			}
			return line
		}},
		// show-live empties the live layer of `show --json`: a record that
		// does not hold what the agent reported.
		"show-live": {cli: func(args []string, out []byte) []byte {
			if args[0] != "show" {
				return out
			}
			m := decodeFrame(out)
			if live, ok := m["live"].(map[string]any); ok {
				live["values"] = map[string]any{}
				delete(live, "mode")
				delete(live, "model")
			}
			return marshalPlain(m)
		}},
		// trace-swap swaps, in the trace, the first two restore calls the
		// sidecar makes after a /reset: a restore in the wrong order.
		"trace-swap": {trace: func(d *doubleState, line []byte) [][]byte {
			var e traceEntry
			if json.Unmarshal(line, &e) != nil {
				return [][]byte{line}
			}
			f := peek(e.Frame)
			d.mu.Lock()
			defer d.mu.Unlock()
			if e.Dir == "client->agent" && e.From == "peer" && lastText(f) == "/reset" {
				d.seen["reset"] = true
			}
			setter := strings.HasPrefix(f.Method, "session/set_") && ownRequest(f)
			if !d.seen["reset"] || d.seen["swapped"] || !setter {
				return [][]byte{line}
			}
			if held, ok := d.options["held"]; ok {
				d.seen["swapped"] = true
				return [][]byte{line, held}
			}
			d.options["held"] = slices.Clone(line)
			return nil
		}},
	}
}

// lying answers the sidecar's set_* calls itself, with what the agent
// would answer had it applied them, once lie says so.
func lying(lie func(d *doubleState, e envelope) bool) rule {
	return rule{
		down: func(d *doubleState, e envelope, line []byte) []byte {
			if !lie(d, e) || !ownRequest(e) || !strings.HasPrefix(e.Method, "session/set_") {
				return line
			}
			var p struct {
				SessionID string `json:"sessionId"`
				ConfigID  string `json:"configId"`
				Value     string `json:"value"`
			}
			_ = json.Unmarshal(e.Params, &p)
			if e.Method != "session/set_config_option" {
				d.toUp(resultLine(e.ID, map[string]any{}))
				return nil
			}
			d.mu.Lock()
			var opts []map[string]any
			_ = json.Unmarshal(d.options[p.SessionID], &opts)
			d.mu.Unlock()
			for _, o := range opts {
				if o["id"] == p.ConfigID {
					o["currentValue"] = p.Value
				}
			}
			d.mu.Lock()
			d.options[p.SessionID] = marshalPlain(opts)
			d.mu.Unlock()
			d.toUp(resultLine(e.ID, map[string]any{"configOptions": opts}))
			return nil
		},
		up: func(d *doubleState, e envelope, line []byte) []byte {
			// Keep the options the agent last reported per session.
			req := d.request(e)
			var r struct {
				SessionID     string          `json:"sessionId"`
				ConfigOptions json.RawMessage `json:"configOptions"`
			}
			if e.Method == "" && json.Unmarshal(e.Result, &r) == nil && len(r.ConfigOptions) > 0 {
				sid := r.SessionID
				if sid == "" {
					sid = sessionIDOf(req.Params)
				}
				d.mu.Lock()
				d.options[sid] = r.ConfigOptions
				d.mu.Unlock()
			}
			return line
		},
	}
}
