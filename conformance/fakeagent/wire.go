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
	mu  sync.Mutex
	out io.Writer
	tee io.Writer // -stdout-log, or nil
	// stderr is where a raw write that fails says so (writeRaw, answerRaw).
	stderr io.Writer
	dead   atomic.Bool
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

// writeRaw writes lines the agent makes itself rather than through the SDK
// connection: through Write, so under the same lock and through the same
// hook. A failure is reported on stderr; a write after a crash is dropped
// in silence.
func (w *lineWriter) writeRaw(line []byte) {
	if _, err := w.Write(line); err != nil && !errors.Is(err, errStopped) {
		fmt.Fprintf(w.stderr, "fakeagent: raw write: %v\n", err)
	}
}

// answerRaw writes the response to a request the agent answers without the
// SDK (the stdin reader, the prompt queue, the v2 adapter), shaped as the
// SDK shapes its own. A notification (no id) gets nothing.
func (w *lineWriter) answerRaw(id json.RawMessage, result json.RawMessage, rerr *acp.RequestError) {
	if len(id) == 0 || string(id) == "null" {
		return
	}
	msg := struct {
		JSONRPC string            `json:"jsonrpc"`
		ID      json.RawMessage   `json:"id"`
		Result  json.RawMessage   `json:"result,omitempty"`
		Error   *acp.RequestError `json:"error,omitempty"`
	}{"2.0", id, result, rerr}
	b, err := json.Marshal(msg)
	if err != nil {
		fmt.Fprintf(w.stderr, "fakeagent: answer %s: %v\n", id, err)
		return
	}
	w.writeRaw(append(b, '\n'))
}

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

// stdinReader is the only reader of stdin. Each message is logged, then
// the crash points, -strict-init and the prompt queue have their say, in
// that order, and what is left goes on to the v2 adapter and the SDK
// through sdk; lines too long for the SDK it answers itself (handleBig).
// It holds the pipe and the -strict-init gate; every other check is made
// by the owner of what it checks.
type stdinReader struct {
	sdk          *io.PipeWriter // the SDK connection's stdin
	maxSDKLine   int            // -max-sdk-line
	ignoreEOF    bool           // -ignore-eof
	queuePrompts bool           // -queue-prompts: session/cancel ends the waiting prompts too
	delete       bool           // -delete: session/delete is answered here, the SDK has none

	calls    callLog
	w        *lineWriter
	crash    *crasher
	gate     *initGate
	queue    *promptQueue
	v2       *v2adapter
	flight   *inflight
	sessions *sessionStore
	peer     *peer
	turns    *turnRunner // cancelled at stdin's end
	stderr   io.Writer
}

// run reads stdin, handing lines of up to maxSDKLine bytes to the SDK and
// answering longer ones itself. It returns at stdin EOF or error; unless
// -ignore-eof it first lets requests in flight finish and then closes sdk,
// which ends the connection.
func (r *stdinReader) run(stdin io.Reader) {
	br := bufio.NewReaderSize(stdin, 1<<16)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			r.handleLine(line)
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) {
			fmt.Fprintf(r.stderr, "fakeagent: read stdin: %v\n", err)
		}
		if r.ignoreEOF {
			return // the connection stays open; Main waits for ctx
		}
		r.drainOnEOF()
		r.sdk.Close()
		return
	}
}

// drainOnEOF runs when stdin ends: it cancels prompts in flight and
// waiting (as if the client had sent session/cancel) and waits until every
// request received has been answered, so piping a file of requests in gets
// all its answers.
func (r *stdinReader) drainOnEOF() {
	r.queue.cancel("")
	r.turns.cancelAll()
	select {
	case <-r.flight.atEOF():
	case <-r.crash.stopped:
	}
}

func (r *stdinReader) handleLine(line []byte) {
	if r.w.dead.Load() {
		return // the agent died; a real process would not read this line
	}
	if len(line) > r.maxSDKLine {
		r.handleBig(line)
		return
	}
	var env envelope
	parsed := json.Unmarshal(line, &env) == nil
	if parsed && env.Method != "" {
		sid := sessionIDOf(env.Params)
		r.calls.record(env.Method, env.ID, sid, env.Params, nil)
		if r.crash.arrived(env.Method) {
			return // -die-on fired: the SDK never sees the message
		}
		if r.gate.beforeInit(env.Method, env.ID) {
			return // -strict-init: answered or ignored, as codex-acp does
		}
		if r.queue.waits(line, env, sid) {
			return // it runs once its session's turn has ended (queue.go)
		}
		if r.queuePrompts && env.Method == acp.AgentMethodSessionCancel {
			r.queue.cancel(sid)
		}
		r.handOn(line, env, sid)
		return
	} else if parsed && r.gate.beforeInit("", env.ID) {
		return // -strict-init: a response before initialize answers nothing
	}
	r.toSDK(line)
}

// handOn hands a client request or notification to the v2 adapter and the
// SDK, once it has been logged and is to run now.
func (r *stdinReader) handOn(line []byte, env envelope, sid string) {
	method := env.Method // what the client asked for, whatever the SDK is handed
	if line, env = r.v2.inbound(line, env); line == nil {
		return // the v2 adapter answered it (v2.go)
	}
	if env.Method == acp.AgentMethodInitialize {
		r.peer.setSubagents(subagentsAdvertised(env.Params)) // before the SDK sees initialize, so before any prompt
	}
	if method == methodSessionDelete && r.delete {
		res, rerr := r.sessions.deleteRequest(env.Params) // the SDK has no session/delete
		r.w.answerRaw(env.ID, res, rerr)
		return
	}
	if env.hasID() {
		r.flight.track(idKey(env.ID), method, sid)
	}
	r.toSDK(line)
}

func (r *stdinReader) toSDK(line []byte) {
	if _, err := r.sdk.Write(append(line, '\n')); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		fmt.Fprintf(r.stderr, "fakeagent: hand line to sdk: %v\n", err)
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
func (r *stdinReader) handleBig(line []byte) {
	var env bigEnvelope
	if json.Unmarshal(line, &env) != nil || env.Method == "" {
		return
	}
	sum := hexSum(line)
	r.calls.record(env.Method, env.ID, env.Params.SessionID, nil, &bigLine{len(line), sum})
	if r.crash.arrived(env.Method) || r.gate.beforeInit(env.Method, env.ID) {
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
		if r.v2.active() {
			r.v2.bigPrompt(env.ID, env.Params.SessionID, res)
			return
		}
	}
	body, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(r.stderr, "fakeagent: big line result: %v\n", err)
		return
	}
	out := []byte(`{"jsonrpc":"2.0","id":`)
	out = append(out, env.ID...)
	out = append(out, `,"result":`...)
	out = append(out, body...)
	out = append(out, "}\n"...)
	r.w.writeRaw(out)
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
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
