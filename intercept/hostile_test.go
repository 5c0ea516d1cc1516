package intercept_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
	acp "github.com/coder/acp-go-sdk"
)

// Hostile input: what a broken or malicious peer can send, and what each
// gets. Every test checks the same three things: a clear answer (or a
// logged drop, where nobody waits), a relay that still works afterwards, and
// a record that did not change (DESIGN.md "Data flow" 5: malformed frames
// never reach the other side, and the relay never dies on input).

// hostileMaxFrame is the rig's --max-frame: small enough to cross cheaply,
// large enough for 100 000 levels of nesting to be judged on depth.
const hostileMaxFrame = 1 << 20

// hrig is the in-process sidecar of rig_test.go with both ends open to the
// test: it can write raw lines as the client and as the agent, and it sees
// every byte that reaches the agent.
type hrig struct {
	client  *acpclient.Client
	store   state.Store
	callLog string

	clientIn io.Writer // the client's side of the relay's stdin

	injectMu sync.Mutex
	agentOut io.Writer // the relay's agent input: the fake agent's lines and injected ones

	tapMu    sync.Mutex
	tapBytes bytes.Buffer // every byte the relay wrote to the agent

	logMu sync.Mutex
	logs  bytes.Buffer
}

// tapWriter records what the relay writes to the agent and passes it on.
type tapWriter struct {
	h *hrig
	w io.WriteCloser
}

func (t tapWriter) Write(p []byte) (int, error) {
	t.h.tapMu.Lock()
	t.h.tapBytes.Write(p)
	t.h.tapMu.Unlock()
	return t.w.Write(p)
}

func (t tapWriter) Close() error { return t.w.Close() }

type lockedLog struct{ h *hrig }

func (l lockedLog) Write(p []byte) (int, error) {
	l.h.logMu.Lock()
	defer l.h.logMu.Unlock()
	return l.h.logs.Write(p)
}

func newHostileRig(t *testing.T, store state.Store, agentArgs ...string) *hrig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &hrig{callLog: t.TempDir() + "/calls.jsonl", store: store}
	if h.store == nil {
		h.store = state.NewMemory()
	}
	log := slog.New(slog.NewTextHandler(lockedLog{h}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cInR, cInW := io.Pipe()
	cOutR, cOutW := io.Pipe()
	aInR, aInW := io.Pipe()   // relay -> fake agent
	aOutR, aOutW := io.Pipe() // fake agent -> copier
	mOutR, mOutW := io.Pipe() // copier and injections -> relay
	h.clientIn, h.agentOut = cInW, mOutW
	var agents sync.WaitGroup
	agents.Add(2)
	go func() {
		defer agents.Done()
		fakeagent.Main(ctx, append([]string{"-call-log", h.callLog}, agentArgs...), aInR, aOutW, io.Discard)
		aOutW.Close()
		aInR.Close()
	}()
	go func() {
		// Copies the fake agent's lines whole, so an injected line never
		// lands inside one.
		defer agents.Done()
		br := bufio.NewReaderSize(aOutR, 1<<16)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				h.injectMu.Lock()
				mOutW.Write(line)
				h.injectMu.Unlock()
			}
			if err != nil {
				h.injectMu.Lock()
				mOutW.Close()
				h.injectMu.Unlock()
				return
			}
		}
	}()
	rec := intercept.New(intercept.Config{Store: h.store, Log: log, Agent: []string{"fakeagent"}})
	relay := proxy.NewRelay(proxy.Config{
		ClientIn: cInR, ClientOut: cOutW, AgentIn: tapWriter{h, aInW}, AgentOut: mOutR,
		MaxFrame: hostileMaxFrame, Log: log, Strict: true,
		Hook: intercept.NewChain(log, rec.StageList()...).WithAnswers(rec.Ledger(), true),
	})
	rec.Bind(relay)
	rec.Start(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(ctx) }()
	h.client = acpclient.Connect(cOutR, cInW, acpclient.Options{})
	t.Cleanup(func() {
		cInW.Close()
		if err := <-relayDone; err != nil {
			t.Errorf("relay: %v", err)
		}
		cOutW.Close()
		agents.Wait()
		closeCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		if err := rec.Close(closeCtx); err != nil {
			t.Errorf("recorder: %v", err)
		}
		cancel()
		if t.Failed() {
			t.Logf("sidecar log:\n%s", h.logText())
		}
	})
	if _, err := h.client.Initialize(t.Context()); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return h
}

// send writes a raw line as the client.
func (h *hrig) send(t *testing.T, line string) {
	t.Helper()
	if _, err := h.clientIn.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("client write: %v", err)
	}
}

// inject writes a raw line as the agent.
func (h *hrig) inject(t *testing.T, line string) {
	t.Helper()
	h.injectMu.Lock()
	defer h.injectMu.Unlock()
	if _, err := h.agentOut.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("agent write: %v", err)
	}
}

func (h *hrig) logText() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.logs.String()
}

// agentLines are the lines that reached the agent.
func (h *hrig) agentLines() [][]byte {
	h.tapMu.Lock()
	defer h.tapMu.Unlock()
	return bytes.Split(bytes.TrimSuffix(h.tapBytes.Bytes(), []byte("\n")), []byte("\n"))
}

// waitClient waits for a line the client received.
func (h *hrig) waitClient(t *testing.T, what string, pred func([]byte) bool) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := h.client.WaitLine(ctx, pred)
	if err != nil {
		t.Fatalf("client never got %s: %v", what, err)
	}
	return l
}

// errorOf decodes a response line's id and error.
func errorOf(t *testing.T, line []byte) (id string, code int, msg string) {
	t.Helper()
	var r struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.Error == nil {
		t.Fatalf("not an error response: %s", line)
	}
	return string(r.ID), r.Error.Code, r.Error.Message
}

// record is the session's record (identity, config layers, handoff), with
// the write time left out. A plain turn does not change it; turns are
// checked on their own.
func (h *hrig) record(t *testing.T, sid acp.SessionId) string {
	t.Helper()
	rec, err := h.store.Session(t.Context(), string(sid))
	if err != nil {
		t.Fatalf("session %s: %v", sid, err)
	}
	rec.Updated = time.Time{}
	b, _ := json.Marshal(rec)
	return string(b)
}

// turnStatuses lists the session's turns as "index:status:prompt".
func (h *hrig) turnStatuses(t *testing.T, sid acp.SessionId) string {
	t.Helper()
	turns, err := h.store.Turns(t.Context(), string(sid))
	if err != nil {
		t.Fatalf("turns %s: %v", sid, err)
	}
	var out []string
	for _, tr := range turns {
		out = append(out, fmt.Sprintf("%d:%s:%s", tr.Index, tr.Status, firstWords(tr.PromptText)))
	}
	return strings.Join(out, " ")
}

func firstWords(s string) string {
	if len(s) > 20 {
		s = s[:20]
	}
	return s
}

// alive proves the relay still works: a prompt and its answer.
func (h *hrig) alive(t *testing.T, sid acp.SessionId) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reason, _, err := h.client.Prompt(ctx, sid, "still there?")
	if err != nil || reason != acp.StopReasonEndTurn {
		t.Fatalf("a valid prompt afterwards: %q, %v", reason, err)
	}
}

// start opens a session and runs one turn, so the record has something to lose.
func (h *hrig) start(t *testing.T) acp.SessionId {
	t.Helper()
	ctx := t.Context()
	sess, err := h.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.client.Prompt(ctx, sess.SessionId, "first turn"); err != nil {
		t.Fatal(err)
	}
	return sess.SessionId
}

func quote(s acp.SessionId) string { b, _ := json.Marshal(string(s)); return string(b) }

// prompt is a session/prompt line with a raw sessionId value.
func promptLine(id, sidJSON, text string) string {
	t, _ := json.Marshal(text)
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"session/prompt","params":{"sessionId":` + sidJSON + `,"prompt":[{"type":"text","text":` + string(t) + `}]}}`
}

// agentSaw reports whether any line that reached the agent contains s.
func (h *hrig) agentSaw(s string) bool {
	for _, l := range h.agentLines() {
		if bytes.Contains(l, []byte(s)) {
			return true
		}
	}
	return false
}

func (h *hrig) clientSaw(s string) bool {
	for _, l := range h.client.Lines() {
		if bytes.Contains(l, []byte(s)) {
			return true
		}
	}
	return false
}

func TestHostileOversizedFrames(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	before := h.record(t, sid)
	huge := strings.Repeat("x", 2*hostileMaxFrame)

	// A request from the client: an error for its id; the agent never sees it.
	h.send(t, promptLine("big-1", quote(sid), huge))
	l := h.waitClient(t, "an answer to the oversized request", acpclient.HasID(`"big-1"`))
	if _, code, msg := errorOf(t, l); code != -32600 || !strings.Contains(msg, "--max-frame") {
		t.Errorf("oversized request answered %d %q; want -32600 naming --max-frame", code, msg)
	}
	// A notification from the client: nobody waits; dropped and logged.
	h.send(t, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":`+quote(sid)+`,"pad":"`+huge+`"}}`)
	// From the agent: a notification is dropped; a response to an id
	// nobody sent gets an error in its place, to the client.
	h.inject(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`+quote(sid)+`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+huge+`"}}}}`)
	h.inject(t, `{"jsonrpc":"2.0","id":"nobody-1","result":{"pad":"`+huge+`"}}`)
	l = h.waitClient(t, "an error in place of the oversized response", acpclient.HasID(`"nobody-1"`))
	if _, code, msg := errorOf(t, l); code != -32603 || !strings.Contains(msg, "--max-frame") {
		t.Errorf("oversized response replaced by %d %q; want -32603 naming --max-frame", code, msg)
	}

	if after := h.record(t, sid); after != before {
		t.Errorf("record changed:\n%s\n%s", before, after)
	}
	h.alive(t, sid)
	if got := h.turnStatuses(t, sid); got != "1:completed:first turn 2:completed:still there?" {
		t.Errorf("turns: %s", got)
	}
	for _, l := range h.agentLines() {
		if len(l) > hostileMaxFrame {
			t.Errorf("a line of %d bytes reached the agent", len(l))
		}
	}
	for _, l := range h.client.Lines() {
		if len(l) > hostileMaxFrame {
			t.Errorf("a line of %d bytes reached the client", len(l))
		}
	}
	if n := strings.Count(h.logText(), "frame over the size limit"); n != 4 {
		t.Errorf("%d oversized frames logged, want 4", n)
	}
}

// An oversized response to a prompt the client waits on: the client gets an
// error for its id at once, and the turn is still the agent's to end.
func TestHostileOversizedResponseToAPrompt(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	h.send(t, promptLine("hang-1", quote(sid), "hang"))
	h.waitClient(t, "the agent waiting", acpclient.Contains("waiting for session/cancel"))
	h.inject(t, `{"jsonrpc":"2.0","id":"hang-1","result":{"stopReason":"end_turn","pad":"`+strings.Repeat("y", 2*hostileMaxFrame)+`"}}`)
	l := h.waitClient(t, "an error for the prompt", acpclient.HasID(`"hang-1"`))
	if _, code, _ := errorOf(t, l); code != -32603 {
		t.Errorf("dropped prompt response replaced by code %d, want -32603", code)
	}
	if err := h.client.Cancel(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	// The agent's own answer comes after the cancel and closes the turn.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := h.client.WaitLine(ctx, func(l []byte) bool {
		return acpclient.HasID(`"hang-1"`)(l) && bytes.Contains(l, []byte(`"cancelled"`))
	}); err != nil {
		t.Fatalf("the agent's answer after cancel: %v", err)
	}
	h.alive(t, sid)
	turns, _ := h.store.Turns(t.Context(), string(sid))
	if len(turns) != 3 || turns[1].Status != state.TurnCancelled || turns[2].Status != state.TurnCompleted {
		t.Errorf("turns after an oversized response: %+v", turns)
	}
}

func TestHostileInvalidUTF8(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	before := h.record(t, sid)

	h.send(t, promptLine("utf-1", quote(sid), "ok")[:60]+"\xff\xfe"+promptLine("utf-1", quote(sid), "ok")[60:])
	l := h.waitClient(t, "a parse error", func(l []byte) bool { return bytes.Contains(l, []byte("-32700")) })
	// The line is JSON but for the bytes in a string: its id is readable,
	// and the editor waits for an answer under it.
	if id, code, msg := errorOf(t, l); id != `"utf-1"` || code != -32700 || !strings.Contains(msg, "UTF-8") {
		t.Errorf("invalid UTF-8 answered id %s code %d %q; want \"utf-1\", -32700, naming UTF-8", id, code, msg)
	}
	// From the agent: dropped, whether it is a frame or stray text.
	h.inject(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`+quote(sid)+`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"bad `+"\xc3\x28"+`"}}}}`)
	h.inject(t, "Debugger listening on ws://127.0.0.1:9229 \xff")

	h.alive(t, sid)
	if h.agentSaw("utf-1") {
		t.Errorf("the malformed request reached the agent")
	}
	for _, l := range h.client.Lines() {
		if bytes.Contains(l, []byte("bad ")) || bytes.Contains(l, []byte("Debugger")) {
			t.Errorf("the agent's malformed line reached the client: %q", l)
		}
	}
	if n := strings.Count(h.logText(), "agent wrote a malformed frame; dropped"); n != 2 {
		t.Errorf("%d malformed agent lines logged, want 2", n)
	}
	turns, _ := h.store.Turns(t.Context(), string(sid))
	if len(turns) != 2 || strings.Contains(turns[1].Answer, "bad") {
		t.Errorf("turns: %+v", turns)
	}
	if after := h.record(t, sid); after != before {
		t.Errorf("record changed:\n%s\n%s", before, after)
	}
}

func TestHostileDeepNesting(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	before := h.record(t, sid)
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)

	h.send(t, `{"jsonrpc":"2.0","id":"deep-1","method":"session/prompt","params":{"sessionId":`+quote(sid)+`,"prompt":[],"_meta":{"x":`+deep+`}}}`)
	l := h.waitClient(t, "a parse error", func(l []byte) bool { return bytes.Contains(l, []byte("-32700")) })
	if id, code, msg := errorOf(t, l); id != `"deep-1"` || code != -32700 || !strings.Contains(msg, "nesting deeper") {
		t.Errorf("deep nesting answered id %s code %d %q; want the request's own id", id, code, msg)
	}
	h.inject(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`+quote(sid)+`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"deep"},"_meta":`+deep+`}}}`)
	h.inject(t, `{"jsonrpc":"2.0","id":"deep-2","method":"fs/read_text_file","params":{"sessionId":`+quote(sid)+`,"path":`+deep+`}}`)
	if after := h.record(t, sid); after != before {
		t.Errorf("record changed:\n%s\n%s", before, after)
	}

	// Nesting encoding/json accepts is relayed, and recorded, as any frame.
	legal := strings.Repeat(`{"a":`, 9_000) + "1" + strings.Repeat("}", 9_000)
	h.send(t, `{"jsonrpc":"2.0","id":"legal-1","method":"session/prompt","params":{"sessionId":`+quote(sid)+`,"prompt":[{"type":"text","text":"nested meta"}],"_meta":{"x":`+legal+`}}}`)
	h.waitClient(t, "the answer to a legal deep prompt", acpclient.HasID(`"legal-1"`))

	h.alive(t, sid)
	if h.agentSaw("deep-1") || h.clientSaw("deep-2") || h.clientSaw(`"text":"deep"`) {
		t.Errorf("a too-deep frame crossed")
	}
	if !h.agentSaw("legal-1") {
		t.Errorf("a legal deep frame did not reach the agent")
	}
	turns, _ := h.store.Turns(t.Context(), string(sid))
	if len(turns) != 3 || turns[1].PromptText != "nested meta" || turns[1].Status != state.TurnCompleted {
		t.Errorf("turns: %+v", turns)
	}
}

// resetSession runs /reset, so the native id differs from the client's and
// the id mapper is at work, and returns the native id now behind sid.
func (h *hrig) resetSession(t *testing.T, sid acp.SessionId) string {
	t.Helper()
	if _, text, err := h.client.Prompt(t.Context(), sid, "/reset"); err != nil || !strings.Contains(text, "reset") {
		t.Fatalf("/reset: %q, %v", text, err)
	}
	h.alive(t, sid)
	native := h.lastCall(t, "session/prompt").SessionID
	if native == "" || native == string(sid) {
		t.Fatalf("native id after reset = %q", native)
	}
	return native
}

func (h *hrig) lastCall(t *testing.T, method string) fakeagent.Call {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(h.callLog)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Method == method {
			return calls[i]
		}
	}
	t.Fatalf("the agent never got %s", method)
	return fakeagent.Call{}
}

func (h *hrig) callCount(t *testing.T) int {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(h.callLog)
	if err != nil {
		t.Fatal(err)
	}
	return len(calls)
}

func TestHostileSessionIDNotAString(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	h.resetSession(t, sid)
	before := h.record(t, sid)
	for i, v := range []string{`42`, `{"id":` + quote(sid) + `}`, `null`, `[` + quote(sid) + `]`} {
		id := fmt.Sprintf("ns-%d", i)
		h.send(t, promptLine(id, v, "typed wrong"))
		l := h.waitClient(t, "an answer to "+id, acpclient.HasID(`"`+id+`"`))
		errorOf(t, l) // the agent refuses it; passed back as it said it
		set := fmt.Sprintf("set-%d", i)
		h.send(t, `{"jsonrpc":"2.0","id":"`+set+`","method":"session/set_config_option","params":{"sessionId":`+v+`,"configId":"model","value":"deep-3"}}`)
		errorOf(t, h.waitClient(t, "an answer to "+set, acpclient.HasID(`"`+set+`"`)))
		ext := fmt.Sprintf("ext-%d", i)
		h.send(t, `{"jsonrpc":"2.0","id":"`+ext+`","method":"_sidecar/status","params":{"sessionId":`+v+`}}`)
		if _, code, _ := errorOf(t, h.waitClient(t, "an answer to "+ext, acpclient.HasID(`"`+ext+`"`))); code != -32602 {
			t.Errorf("_sidecar/status with sessionId %s: code %d, want -32602", v, code)
		}
	}
	if after := h.record(t, sid); after != before {
		t.Errorf("record changed:\n%s\n%s", before, after)
	}
	h.alive(t, sid)
}

// Duplicate members: the frame means what encoding/json reads, the last of
// each, for the sidecar as for the agent.
func TestHostileDuplicateKeys(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	native := h.resetSession(t, sid)
	ctx := t.Context()
	turnsBefore, _ := h.store.Turns(ctx, string(sid))

	// Two sessionIds: the last is the session's; the agent gets the native id.
	h.send(t, `{"jsonrpc":"2.0","id":"dup-1","method":"session/prompt","params":{"sessionId":"bogus","sessionId":`+quote(sid)+`,"prompt":[{"type":"text","text":"two ids"}]}}`)
	if l := h.waitClient(t, "the answer to dup-1", acpclient.HasID(`"dup-1"`)); !bytes.Contains(l, []byte("end_turn")) {
		t.Errorf("dup-1 answered %s", l)
	}
	if got := h.lastCall(t, "session/prompt").SessionID; got != native {
		t.Errorf("the agent got sessionId %q, want the native %q", got, native)
	}
	// Two methods: the last decides. A prompt disguised behind a
	// _sidecar method goes to the agent; the reverse is the sidecar's.
	h.send(t, `{"jsonrpc":"2.0","id":"dup-2","method":"_sidecar/status","method":"session/prompt","params":{"sessionId":`+quote(sid)+`,"prompt":[{"type":"text","text":"two methods"}]}}`)
	if l := h.waitClient(t, "the answer to dup-2", acpclient.HasID(`"dup-2"`)); !bytes.Contains(l, []byte("end_turn")) {
		t.Errorf("dup-2 answered %s", l)
	}
	calls := h.callCount(t)
	h.send(t, `{"jsonrpc":"2.0","id":"dup-3","method":"session/prompt","method":"_sidecar/status","params":{"sessionId":`+quote(sid)+`,"prompt":[]}}`)
	if l := h.waitClient(t, "the answer to dup-3", acpclient.HasID(`"dup-3"`)); !bytes.Contains(l, []byte(`"nativeSessionId"`)) {
		t.Errorf("dup-3 answered %s; want the sidecar's status", l)
	}
	if n := h.callCount(t); n != calls {
		t.Errorf("a _sidecar request reached the agent (%d calls)", n-calls)
	}
	turns, _ := h.store.Turns(ctx, string(sid))
	if len(turns) != len(turnsBefore)+2 || turns[len(turns)-2].PromptText != "two ids" || turns[len(turns)-1].PromptText != "two methods" {
		t.Errorf("turns: %+v", turns)
	}
	h.alive(t, sid)
}

func TestHostileResponseToNobody(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	before := h.record(t, sid)
	turnsBefore := h.turnStatuses(t, sid)
	// One in the sidecar's own id space is the sidecar's; nobody waits for
	// it, and it is consumed.
	h.inject(t, `{"jsonrpc":"2.0","id":"`+proxy.OwnIDPrefix+`999","result":{}}`)
	// Any other is valid JSON and passes (DESIGN.md "Data flow" 5): the
	// client judges it. Nothing in the record answers to it.
	orphan := `{"jsonrpc":"2.0","id":424242,"result":{"stopReason":"end_turn"}}`
	h.inject(t, orphan)
	h.inject(t, `{"jsonrpc":"2.0","id":"nobody","error":{"code":-32000,"message":"who asked"}}`)
	h.waitClient(t, "the orphan response", func(l []byte) bool { return string(l) == orphan })
	h.waitClient(t, "the orphan error", acpclient.HasID(`"nobody"`))
	if after := h.record(t, sid); after != before {
		t.Errorf("record changed:\n%s\n%s", before, after)
	}
	if got := h.turnStatuses(t, sid); got != turnsBefore {
		t.Errorf("turns changed: %s, was %s", got, turnsBefore)
	}
	h.alive(t, sid)
	if h.clientSaw(proxy.OwnIDPrefix + "999") {
		t.Errorf("a response in the sidecar's id space reached the client")
	}
}

func TestHostileSidecarMethodsFromTheAgent(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	calls := h.callCount(t)
	for _, m := range []string{wire.ExtReset, wire.ExtRollback, wire.ExtStatus, "_sidecar/nope"} {
		h.inject(t, `{"jsonrpc":"2.0","id":"evil-`+m+`","method":"`+m+`","params":{"sessionId":`+quote(sid)+`,"keepTurns":0}}`)
	}
	h.inject(t, `{"jsonrpc":"2.0","method":"_sidecar/reset","params":{"sessionId":`+quote(sid)+`}}`)
	h.alive(t, sid)
	for _, m := range []string{wire.ExtReset, wire.ExtRollback, wire.ExtStatus, "_sidecar/nope"} {
		var answer []byte
		for _, l := range h.agentLines() {
			if acpclient.HasID(`"evil-` + m + `"`)(l) {
				answer = l
			}
		}
		if answer == nil {
			t.Errorf("%s from the agent: no answer to the agent", m)
			continue
		}
		if _, code, _ := errorOf(t, answer); code != -32601 {
			t.Errorf("%s from the agent answered %d, want -32601", m, code)
		}
	}
	if h.clientSaw(`"method":"_sidecar/`) {
		t.Errorf("a _sidecar method from the agent reached the client")
	}
	// Nothing was reset: no session/new beyond the first, the turn kept.
	if n := h.callCount(t); n != calls+1 {
		t.Errorf("the agent got %d calls, want only the later prompt", n-calls)
	}
	turns, _ := h.store.Turns(t.Context(), string(sid))
	if len(turns) != 2 || turns[0].Status != state.TurnCompleted {
		t.Errorf("turns: %+v", turns)
	}
}

func TestHostileRewindArguments(t *testing.T) {
	h := newHostileRig(t, nil)
	sid := h.start(t)
	h.alive(t, sid)
	before, turnsBefore := h.record(t, sid), h.turnStatuses(t, sid)
	calls := h.callCount(t)
	for _, tt := range []struct{ args, want string }{
		{"0", "cannot rewind 0 turns: the conversation has 2"},
		{"-3", "cannot rewind -3 turns"},
		{"99", "cannot rewind 99 turns: the conversation has 2"},
		{"abc", `"abc" is not a number of turns`},
		{"1x", `"1x" is not a number of turns`},
		{"1 2", `"1 2" is not a number of turns`},
		{"99999999999999999999", "is not a number of turns"},
	} {
		reason, text, err := h.client.Prompt(t.Context(), sid, "/rewind "+tt.args)
		if err != nil || reason != acp.StopReasonEndTurn || !strings.Contains(text, "/rewind failed") || !strings.Contains(text, tt.want) {
			t.Errorf("/rewind %s: %q %q %v; want a message with %q", tt.args, reason, text, err, tt.want)
		}
	}
	if n := h.callCount(t); n != calls {
		t.Errorf("refused rewinds made %d agent calls", n-calls)
	}
	if after := h.record(t, sid); after != before {
		t.Errorf("record changed:\n%s\n%s", before, after)
	}
	if got := h.turnStatuses(t, sid); got != turnsBefore {
		t.Errorf("turns changed: %s, was %s", got, turnsBefore)
	}
	h.alive(t, sid)
}

// A store the sidecar cannot open: state.Open says ErrCorrupt, and the way
// on (the CLI's openStore) is state.Fallback: a memory store, and a notice
// that says why and where. The sidecar relays and records on it.
func TestHostileCorruptStore(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"manifest truncated", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "MANIFEST"), 3); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest garbage", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("not a manifest"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"tables truncated", func(t *testing.T, dir string) {
			ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			if len(ssts) == 0 {
				t.Fatal("no table to damage")
			}
			for _, f := range ssts {
				if err := os.Truncate(f, 10); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := state.Open(t.Context(), dir, state.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.PutSession(t.Context(), &state.Session{ClientID: "old", NativeID: "old"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, dir)
			_, err = state.Open(t.Context(), dir, state.Options{})
			if !errors.Is(err, state.ErrCorrupt) {
				t.Fatalf("Open of a damaged store: %v, want ErrCorrupt", err)
			}
			mem, notice := state.Fallback(dir, err)
			if !strings.Contains(notice, dir) || !strings.Contains(notice, "in memory") {
				t.Errorf("fallback notice %q does not say where and what happens", notice)
			}
			h := newHostileRig(t, mem)
			sid := h.start(t)
			h.alive(t, sid)
			turns, err := mem.Turns(t.Context(), string(sid))
			if err != nil || len(turns) != 2 {
				t.Errorf("recorded in memory: %d turns, %v", len(turns), err)
			}
		})
	}
}

// envFullDisk tells the child process of TestHostileFullDisk its case and
// state dir: "when:dir".
const envFullDisk = "ACP_SIDECAR_TEST_FULL_DISK"

// A state dir on a full disk, full before the sidecar starts or filling up
// while it runs. badger maps its files to memory, so a full disk can end the
// process with SIGBUS where a write error was expected; each case therefore
// runs in a child process, and the test reads its fate.
func TestHostileFullDisk(t *testing.T) {
	if v := os.Getenv(envFullDisk); v != "" {
		when, dir, _ := strings.Cut(v, ":")
		fullDiskChild(t, when == "before", dir)
		return
	}
	for _, when := range []string{"before", "during"} {
		t.Run("full "+when+" start", func(t *testing.T) {
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
				t.Skipf("cannot mount a 64 KiB tmpfs (needs root): %v: %s", err, out)
			}
			t.Cleanup(func() {
				if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v: %s", mnt, err, out)
				}
			})
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHostileFullDisk$", "-test.v")
			cmd.Env = append(os.Environ(), envFullDisk+"="+when+":"+filepath.Join(mnt, "state"))
			out, err := cmd.CombinedOutput()
			if bytes.Contains(out, []byte("SIGBUS")) {
				t.Fatalf("the disk filled while badger had its files mapped and the write faulted (SIGBUS): "+
					"the store must not open on a disk short of room. Child output:\n%s", tail(out, 1200))
			}
			if err != nil || !bytes.Contains(out, []byte("full disk: relayed and recorded")) {
				t.Fatalf("child: %v\n%s", err, tail(out, 3000))
			}
			for _, l := range bytes.Split(out, []byte("\n")) {
				if bytes.Contains(l, []byte("fell back")) {
					t.Logf("child: %s", bytes.TrimSpace(l))
				}
			}
		})
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// fullDiskChild runs the sidecar with its store on the small disk, opened as
// the CLI does (state.Open, else state.Fallback), and records six turns of
// 8 KiB: more than the disk holds.
func fullDiskChild(t *testing.T, fillFirst bool, dir string) {
	if fillFirst {
		if f, err := os.Create(filepath.Join(filepath.Dir(dir), "filler")); err == nil {
			f.Write(make([]byte, 1<<20)) // ENOSPC at 64 KiB
			f.Close()
		}
	}
	var store state.Store
	s, err := state.Open(t.Context(), dir, state.Options{})
	if err != nil {
		var notice string
		store, notice = state.Fallback(dir, err)
		t.Logf("store fell back: %s", notice)
	} else {
		store = s
		t.Cleanup(func() { s.Close() })
	}
	h := newHostileRig(t, store)
	sid := h.start(t)
	for i := range 5 {
		if _, _, err := h.client.Prompt(t.Context(), sid, fmt.Sprintf("turn %d %s", i, strings.Repeat("z", 8<<10))); err != nil {
			t.Fatalf("prompt %d on a full disk: %v", i, err)
		}
	}
	turns, err := store.Turns(t.Context(), string(sid))
	if err != nil || len(turns) != 6 {
		t.Fatalf("recorded %d turns, %v; want 6", len(turns), err)
	}
	fmt.Println("full disk: relayed and recorded")
}
