package fakeagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// v2Client is a raw ACP v2 client of a fake agent run by Main in-process
// over pipes: acpclient speaks v1, and these tests send v2 frames exactly
// as written and read the agent's lines one by one. At the end of the test
// every frame either side wrote is checked against the v2 schema
// (v2SchemaErrors).
type v2Client struct {
	t      *testing.T
	ctx    context.Context
	in     *io.PipeWriter
	code   chan int
	stderr *acpclient.Buffer

	mu      sync.Mutex
	wire    []v2Wire // both sides, in the order the client saw them
	lines   [][]byte // the agent's
	read    int      // lines next has returned
	ended   bool
	changed chan struct{} // closed and replaced on every new line
	nextID  int
}

// v2Patience bounds each wait for the agent, so a hang fails the test
// instead of the whole binary's timeout. It is no assertion on time.
const v2Patience = time.Minute

func startV2(t *testing.T, args ...string) *v2Client {
	t.Helper()
	v2Defs(t) // no schema, no test: fail before the exchange
	ctx, cancel := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &v2Client{t: t, ctx: ctx, in: inW, code: make(chan int, 1), stderr: &acpclient.Buffer{}, changed: make(chan struct{})}
	go func() {
		code := fakeagent.Main(ctx, args, inR, outW, c.stderr)
		outW.Close()
		c.code <- code
	}()
	go c.readAgent(outR)
	t.Cleanup(func() {
		cancel()
		inW.Close()
		inR.Close()
		outR.Close()
		c.mu.Lock()
		wire := append([]v2Wire(nil), c.wire...)
		c.mu.Unlock()
		for i, e := range v2SchemaErrors(v2Defs(t), wire) {
			if i == 8 {
				t.Errorf("and more frames that are not ACP v2")
				break
			}
			t.Error(e)
		}
		if t.Failed() {
			t.Logf("fake agent stderr:\n%s", c.stderr.Bytes())
		}
	})
	return c
}

// readAgent is the only reader of the agent's stdout.
func (c *v2Client) readAgent(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		c.mu.Lock()
		if l := strings.TrimSuffix(string(line), "\n"); l != "" {
			c.lines = append(c.lines, []byte(l))
			c.wire = append(c.wire, v2Wire{line: []byte(l)})
		}
		if err != nil {
			c.ended = true
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// send writes one frame; bad marks one that is not v2 on purpose.
func (c *v2Client) send(line string, bad bool) {
	c.t.Helper()
	c.mu.Lock()
	c.wire = append(c.wire, v2Wire{fromClient: true, line: []byte(line), bad: bad})
	c.mu.Unlock()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("send %s: %v", line, err)
	}
}

func (c *v2Client) frame(id int, method string, params any) string {
	c.t.Helper()
	p, err := json.Marshal(params)
	if err != nil {
		c.t.Fatal(err)
	}
	head := `{"jsonrpc":"2.0",`
	if id > 0 {
		head += `"id":` + strconv.Itoa(id) + `,`
	}
	return head + `"method":` + strconv.Quote(method) + `,"params":` + string(p) + `}`
}

// call sends a v2 request and returns its id.
func (c *v2Client) call(method string, params any) int {
	c.t.Helper()
	c.nextID++
	c.send(c.frame(c.nextID, method, params), false)
	return c.nextID
}

// callBad sends a request that is not v2 on purpose.
func (c *v2Client) callBad(method string, params any) int {
	c.t.Helper()
	c.nextID++
	c.send(c.frame(c.nextID, method, params), true)
	return c.nextID
}

func (c *v2Client) notify(method string, params any) {
	c.t.Helper()
	c.send(c.frame(0, method, params), false)
}

// answer answers the agent's request with id with result.
func (c *v2Client) answer(id json.RawMessage, result string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":`+string(id)+`,"result":`+result+`}`, false)
}

// next is the agent's next line; ok is false once its output ended.
func (c *v2Client) next() (v2Line, bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, v2Patience)
	defer cancel()
	for {
		c.mu.Lock()
		if c.read < len(c.lines) {
			l := c.lines[c.read]
			c.read++
			c.mu.Unlock()
			return parseV2Line(c.t, l), true
		}
		ended, changed := c.ended, c.changed
		c.mu.Unlock()
		if ended {
			return v2Line{}, false
		}
		select {
		case <-changed:
		case <-ctx.Done():
			c.t.Fatalf("waiting for the agent's next line: %v", context.Cause(ctx))
		}
	}
}

// until reads the agent's lines up to and including the first that done
// accepts.
func (c *v2Client) until(done func(v2Line) bool) []v2Line {
	c.t.Helper()
	var out []v2Line
	for {
		l, ok := c.next()
		if !ok {
			c.t.Fatalf("the agent's output ended after %q", kindsOf(out))
		}
		out = append(out, l)
		if done(l) {
			return out
		}
	}
}

// exchange sends a request and reads up to its answer.
func (c *v2Client) exchange(method string, params any) []v2Line {
	c.t.Helper()
	id := c.call(method, params)
	return c.until(answers(id))
}

// exchangeBad is exchange for a request that is not v2 on purpose.
func (c *v2Client) exchangeBad(method string, params any) []v2Line {
	c.t.Helper()
	id := c.callBad(method, params)
	return c.until(answers(id))
}

// idle accepts the state_update that ends a turn on sid.
func idle(sid string) func(v2Line) bool {
	return func(l v2Line) bool { return l.SessionID == sid && l.Kind == "state_update" && l.State == "idle" }
}

func answers(id int) func(v2Line) bool {
	return func(l v2Line) bool { return l.Method == "" && string(l.ID) == strconv.Itoa(id) }
}

func (c *v2Client) exitCode() int {
	c.t.Helper()
	select {
	case code := <-c.code:
		c.code <- code
		return code
	case <-time.After(v2Patience):
		c.t.Fatal("Main did not return")
		return -1
	}
}

// v2Line is one line the agent wrote, decoded.
type v2Line struct {
	Raw    []byte
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	// Of a session/update:
	SessionID string
	Kind      string // sessionUpdate
	Update    map[string]json.RawMessage
	State     string // of a state_update
	Stop      string // its stopReason
	MessageID string
}

func parseV2Line(t *testing.T, raw []byte) v2Line {
	t.Helper()
	l := v2Line{Raw: raw}
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatalf("the agent wrote %s: %v", raw, err)
	}
	if l.Method != "session/update" {
		return l
	}
	var p struct {
		SessionID string                     `json:"sessionId"`
		Update    map[string]json.RawMessage `json:"update"`
	}
	if err := json.Unmarshal(l.Params, &p); err != nil {
		t.Fatalf("session/update %s: %v", raw, err)
	}
	l.SessionID, l.Update = p.SessionID, p.Update
	for k, dst := range map[string]*string{"sessionUpdate": &l.Kind, "state": &l.State, "stopReason": &l.Stop, "messageId": &l.MessageID} {
		if v, ok := p.Update[k]; ok {
			_ = json.Unmarshal(v, dst) // a null or a non-string stays ""
		}
	}
	return l
}

// short names a line for a sequence check: the update kind (with a
// state_update's state and stop reason), "result" or "error CODE" of a
// response, or the method of anything else.
func (l v2Line) short() string {
	switch {
	case l.Kind == "state_update":
		return strings.TrimSuffix("state "+l.State+" "+l.Stop, " ")
	case l.Kind != "":
		return l.Kind
	case l.Method != "":
		return l.Method
	case l.Error != nil:
		return "error " + strconv.Itoa(l.Error.Code)
	default:
		return "result"
	}
}

func kindsOf(ls []v2Line) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.short())
	}
	return out
}

// result decodes a response line's result into v.
func (l v2Line) result(t *testing.T, v any) {
	t.Helper()
	if l.Error != nil || l.Result == nil {
		t.Fatalf("want a result, got %s", l.Raw)
	}
	if err := json.Unmarshal(l.Result, v); err != nil {
		t.Fatalf("result %s: %v", l.Result, err)
	}
}

// field decodes member k of a session/update into v.
func (l v2Line) field(t *testing.T, k string, v any) {
	t.Helper()
	raw, ok := l.Update[k]
	if !ok {
		t.Fatalf("update has no %s: %s", k, l.Raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("update %s: %v", k, errors.Join(err, errors.New(string(l.Raw))))
	}
}
