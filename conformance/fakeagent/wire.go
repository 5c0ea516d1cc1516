package fakeagent

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	acp "github.com/coder/acp-go-sdk"
)

// DefaultMaxSDKLine is the longest stdin line handed to the SDK connection.
// The SDK reads with a bufio.Scanner capped at 10 MB and drops the whole
// connection on a longer line (see ../../../shared/go-libs.md §1), so longer
// lines are answered by the fake agent itself.
const DefaultMaxSDKLine = 8 << 20

var errStopped = errors.New("fake agent stopped writing")

// lineWriter is stdout as both the SDK connection and the raw writes see it.
// Every Write must carry whole lines (the SDK writes one line per call), so a
// mutex is enough to keep lines from interleaving. After kill it drops every
// write: that is how a crash stays abrupt even while SDK goroutines live on.
type lineWriter struct {
	mu   sync.Mutex
	out  io.Writer
	tee  io.Writer // -stdout-log, or nil
	dead atomic.Bool
	// frame runs under mu before each line is written. It returns the line
	// to write in its place (nil: the line as it is; empty: nothing, the
	// line is dropped; it may also be several lines), lines to write right
	// after it, under the same lock so that nothing comes in between, and
	// done (or nil), which runs after mu is released, with the error of
	// writing the follow lines.
	frame func(line []byte) (out []byte, follow [][]byte, done func(error))
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if w.dead.Load() {
		return 0, errStopped
	}
	w.mu.Lock()
	if w.dead.Load() {
		w.mu.Unlock()
		return 0, errStopped
	}
	out := p
	var follow [][]byte
	var done func(error)
	if w.frame != nil {
		var rewritten []byte
		rewritten, follow, done = w.frame(p)
		if rewritten != nil {
			out = rewritten
		}
	}
	var n int
	var err error
	if len(out) > 0 { // an empty rewrite drops the line
		n, err = w.put(out)
	}
	if err == nil {
		n = len(p) // the caller's line went out, in whatever form
	} else {
		n = min(n, len(p))
	}
	var ferr error
	for _, l := range follow {
		if err != nil || ferr != nil {
			break
		}
		if len(l) > 0 {
			_, ferr = w.put(l)
		}
	}
	w.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("write stdout: %w", err)
	}
	if done != nil {
		if ferr != nil {
			ferr = fmt.Errorf("write stdout: %w", ferr)
		}
		done(errors.Join(err, ferr))
	}
	return n, err
}

// put writes one line to stdout and the -stdout-log; w.mu must be held.
func (w *lineWriter) put(p []byte) (int, error) {
	n, err := w.out.Write(p)
	if w.tee != nil && n > 0 {
		_, _ = w.tee.Write(p[:n]) // a broken log must not break the agent
	}
	return n, err
}

func (w *lineWriter) kill() { w.dead.Store(true) }

// envelope is the part of a JSON-RPC message the fake agent peeks at.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

func (e envelope) hasID() bool { return len(e.ID) > 0 && string(e.ID) != "null" }

// idKey makes ids comparable between what the client sent and what the SDK
// echoes (it re-marshals, i.e. compacts, the raw id).
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

func sessionIDOf(params json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p) // not every method has one
	return p.SessionID
}

// readLine returns one line without its '\n', of any length. The slice is
// fresh, with room for the newline the SDK pipe needs.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if line == nil && err == nil {
			line = make([]byte, len(frag)-1, len(frag))
			copy(line, frag)
			return line, nil
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		return line, err
	}
}

// readStdin is the only reader of stdin. It logs each call, hands lines of up
// to maxSDKLine bytes to the SDK through sdk, and answers longer ones itself.
// It returns at stdin EOF or error; unless -ignore-eof it first lets
// requests in flight finish and then closes sdk, which ends the connection.
func (a *agent) readStdin(r io.Reader, sdk *io.PipeWriter) {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			a.handleLine(line, sdk)
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) {
			fmt.Fprintf(a.stderr, "fakeagent: read stdin: %v\n", err)
		}
		if a.cfg.IgnoreEOF {
			return // the connection stays open; Main waits for ctx
		}
		a.drainOnEOF()
		sdk.Close()
		return
	}
}

func (a *agent) handleLine(line []byte, sdk *io.PipeWriter) {
	if a.w.dead.Load() {
		return // the agent died; a real process would not read this line
	}
	if len(line) > a.cfg.MaxSDKLine {
		a.handleBig(line)
		return
	}
	var env envelope
	parsed := json.Unmarshal(line, &env) == nil
	if parsed && env.Method != "" {
		sid := sessionIDOf(env.Params)
		a.calls.record(env.Method, env.ID, sid, env.Params, nil)
		if a.arrived(env.Method) {
			return // -die-on fired: the SDK never sees the message
		}
		if a.beforeInit(env.Method, env.ID) {
			return // -strict-init: answered or ignored, as codex-acp does
		}
		if a.waits(line, env, sid) {
			return // it runs once its session's turn has ended (queue.go)
		}
		if a.cfg.QueuePrompts && env.Method == acp.AgentMethodSessionCancel {
			a.cancelQueued(sid)
		}
		a.handOn(line, env, sid, sdk)
		return
	} else if parsed && a.beforeInit("", env.ID) {
		return // -strict-init: a response before initialize answers nothing
	}
	a.toSDK(line, sdk)
}

// handOn hands a client request or notification to the v2 adapter and the
// SDK, once it has been logged and is to run now.
func (a *agent) handOn(line []byte, env envelope, sid string, sdk *io.PipeWriter) {
	method := env.Method // what the client asked for, whatever the SDK is handed
	if line, env = a.v2.inbound(line, env); line == nil {
		return // the v2 adapter answered it (v2.go)
	}
	if env.Method == acp.AgentMethodInitialize {
		ok := subagentsAdvertised(env.Params)
		a.mu.Lock()
		a.subagents = ok // before the SDK sees initialize, so before any prompt
		a.mu.Unlock()
	}
	if method == methodSessionDelete && a.cfg.Delete {
		a.handleDelete(env.ID, env.Params) // the SDK has no session/delete
		return
	}
	if env.hasID() {
		a.trackRequest(idKey(env.ID), method, sid)
	}
	a.toSDK(line, sdk)
}

func (a *agent) toSDK(line []byte, sdk *io.PipeWriter) {
	if _, err := sdk.Write(append(line, '\n')); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		fmt.Fprintf(a.stderr, "fakeagent: hand line to sdk: %v\n", err)
	}
}

// bigEnvelope decodes a line too long for the SDK in one pass.
type bigEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	} `json:"params"`
}

// handleBig answers a request whose line the SDK could not take; such a
// notification (or garbage) is dropped. The result describes what arrived:
// the line's length and sha256 and, for session/prompt, stopReason end_turn,
// the block count and the sha256 of each text block, so a test can check a
// 20 MiB prompt arrived intact. The turn is not added to the session's
// history.
func (a *agent) handleBig(line []byte) {
	var env bigEnvelope
	if json.Unmarshal(line, &env) != nil || env.Method == "" {
		return
	}
	sum := hexSum(line)
	a.calls.record(env.Method, env.ID, env.Params.SessionID, nil, &bigLine{len(line), sum})
	if a.arrived(env.Method) || a.beforeInit(env.Method, env.ID) {
		return
	}
	if len(env.ID) == 0 || string(env.ID) == "null" {
		return
	}
	res := map[string]any{"bytes": len(line), "sha256": sum}
	if env.Method == acp.AgentMethodSessionPrompt {
		sums := []string{}
		for _, b := range env.Params.Prompt {
			if b.Type == "text" {
				sums = append(sums, hexSum([]byte(b.Text)))
			}
		}
		res["stopReason"] = string(acp.StopReasonEndTurn)
		res["blocks"] = len(env.Params.Prompt)
		res["textSha256"] = sums
		if a.v2.active() {
			a.v2.bigPrompt(env.ID, env.Params.SessionID, res)
			return
		}
	}
	body, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(a.stderr, "fakeagent: big line result: %v\n", err)
		return
	}
	out := []byte(`{"jsonrpc":"2.0","id":`)
	out = append(out, env.ID...)
	out = append(out, `,"result":`...)
	out = append(out, body...)
	out = append(out, "}\n"...)
	a.writeRaw(out)
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (a *agent) writeRaw(line []byte) {
	if _, err := a.w.Write(line); err != nil && !errors.Is(err, errStopped) {
		fmt.Fprintf(a.stderr, "fakeagent: raw write: %v\n", err)
	}
}

// jsonString quotes s as JSON without HTML escaping, as a byte-exact raw
// line needs.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// notificationLine marshals a session/update the SDK way, for writes that
// must not go through the SDK connection (see agent.frameLine).
func notificationLine(n acp.SessionNotification) ([]byte, error) {
	params, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("marshal session/update: %w", err)
	}
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":`)
	line = append(line, params...)
	return append(line, "}\n"...), nil
}

// MetaLine is the exact line the prompt "meta" makes the agent write: an
// agent_message_chunk whose _meta (on the update and on the params) holds a
// 20-digit integer and the characters <>&, bytes an SDK would mangle (float64,
// \u003c escapes). It includes the trailing newline.
func MetaLine(sessionID string) []byte {
	meta := `{"big":12345678901234567890,"html":"<>&"}`
	return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + jsonString(sessionID) +
		`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"fake-agent meta <>&\n"},"_meta":` + meta +
		`},"_meta":` + meta + `}}` + "\n")
}

// UnknownUpdateLine is the exact line the prompt "unknown update" makes the
// agent write: a session/update of a kind no SDK knows, with extra fields. It
// includes the trailing newline.
func UnknownUpdateLine(sessionID string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + jsonString(sessionID) +
		`,"update":{"sessionUpdate":"brand_new_update","brandNew":{"answer":42,"nested":[1,"two",null,{"x":1.50}]},"note":"unknown to every SDK"}}}` + "\n")
}

// marshal encodes v as JSON without HTML escaping: the bytes a client
// compares with what it sent keep their <, > and &.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
