package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// rpcError is a JSON-RPC error object as a peer sent it.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error gives the code, the message and the data, cut: an agent's
// "Invalid request" says only in its data what it found invalid
// (codex-acp's "first ACP request must be initialize"), and a check's
// failure must say which.
func (e *rpcError) Error() string {
	s := fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message)
	if len(e.Data) > 0 && string(e.Data) != "null" {
		d := string(e.Data)
		if len(d) > 300 {
			d = d[:300] + " ..."
		}
		s += " (data: " + d + ")"
	}
	return s
}

// envelope is what the conn reads of every line.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

func (e envelope) hasID() bool { return len(e.ID) > 0 && string(e.ID) != "null" }

// pendingCall is a request waiting for its response.
type pendingCall struct {
	method string
	line   []byte
	ch     chan envelope
	turn   *turn // a session/prompt's turn (proto.go), nil for any other request
}

// event is one line of a run's transcript.
type event struct {
	T     time.Time
	Dir   string // "send" (client to peer) or "recv"
	Frame []byte
}

// conn is a raw NDJSON JSON-RPC client, like the official test kit's
// harness: it writes exactly the bytes it is given, keeps every line both
// ways, answers the peer's requests minimally, and feeds the session
// config the peer reports to its configBook. It speaks the ACP version of
// its dialect; what differs between the versions is in proto.go and
// nowhere else.
type conn struct {
	name    string
	dialect dialect // the ACP version the client speaks, and what differs in it (proto.go)
	rc      *acpclient.RawClient
	errs    *acpclient.Buffer
	configs *configBook // the session config the peer reports (config.go)

	mu      sync.Mutex
	nextID  int
	pending map[string]*pendingCall
	events  []event
	recv    []envelope // every line received that parsed, in order
	raw     [][]byte   // the same lines, exactly
	changed chan struct{}
	ended   bool
	// accepted are the v2 turns whose prompt the peer answered with its
	// messageId and whose idle state_update has not come yet, by session.
	accepted map[string]*turn
	done     chan struct{}
}

func newConn(name string, proto int, rc *acpclient.RawClient, errs *acpclient.Buffer) *conn {
	c := &conn{name: name, dialect: dialect{proto: max(proto, 1), peer: name}, rc: rc, errs: errs, configs: newConfigBook(),
		pending: map[string]*pendingCall{}, changed: make(chan struct{}), accepted: map[string]*turn{}, done: make(chan struct{})}
	go c.pump()
	return c
}

// pump is the only reader of the peer's lines.
func (c *conn) pump() {
	defer close(c.done)
	defer c.update(func() { c.ended = true })
	ctx := context.Background()
	for i := 0; ; {
		lines, err := c.rc.WaitLines(ctx, i+1)
		for ; i < len(lines); i++ {
			c.handle(lines[i])
		}
		if err != nil {
			return
		}
	}
}

func (c *conn) update(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *conn) handle(line []byte) {
	var e envelope
	parsed := json.Unmarshal(line, &e) == nil
	var pc *pendingCall
	c.update(func() {
		c.events = append(c.events, event{T: time.Now(), Dir: "recv", Frame: line})
		if !parsed {
			return
		}
		c.recv = append(c.recv, e)
		c.raw = append(c.raw, line)
		switch {
		case e.Method == "" && e.hasID():
			pc = c.pending[string(e.ID)]
			delete(c.pending, string(e.ID))
			if pc != nil && e.Error == nil {
				c.configs.noteResult(pc.method, pc.line, e.Result)
			}
			if pc != nil && pc.turn != nil {
				c.promptAnswered(pc.turn, e)
			}
		case e.Method == "session/update":
			c.configs.applyUpdate(e.Params)
			c.turnUpdate(e.Params)
		}
	})
	if pc != nil {
		pc.ch <- e
	}
	if e.Method != "" && e.hasID() {
		c.answer(e)
	}
}

// answer replies to a request from the peer: permission requests get the
// first allow option (else cancelled), the rest -32601, as a client that
// advertises no fs or terminal capability would.
func (c *conn) answer(e envelope) {
	var result any
	var rerr *rpcError
	if e.Method == "session/request_permission" {
		var p struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		}
		_ = json.Unmarshal(e.Params, &p)
		outcome := map[string]any{"outcome": "cancelled"}
		for _, o := range p.Options {
			if strings.HasPrefix(o.Kind, "allow") {
				outcome = map[string]any{"outcome": "selected", "optionId": o.OptionID}
				break
			}
		}
		result = map[string]any{"outcome": outcome}
	} else {
		rerr = &rpcError{Code: -32601, Message: "Method not found: " + e.Method}
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": e.ID}
	if rerr != nil {
		msg["error"] = rerr
	} else {
		msg["result"] = result
	}
	b, _ := json.Marshal(msg)
	_ = c.write(b)
}

func (c *conn) write(line []byte) error {
	c.update(func() { c.events = append(c.events, event{T: time.Now(), Dir: "send", Frame: line}) })
	return c.rc.Write(append(append([]byte(nil), line...), '\n'))
}

// request builds a request line with the next numeric id; params are
// marshalled unless they are already json.RawMessage (kept byte for byte).
func (c *conn) request(method string, params any) (string, []byte, error) {
	var p []byte
	if params != nil {
		var err error
		if p, err = json.Marshal(params); err != nil {
			return "", nil, fmt.Errorf("marshal %s params: %w", method, err)
		}
	}
	c.mu.Lock()
	c.nextID++
	id := strconv.Itoa(c.nextID)
	c.mu.Unlock()
	line := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":` + strconv.Quote(method))
	if p != nil {
		line = append(append(line, `,"params":`...), p...)
	}
	return id, append(line, '}'), nil
}

// call sends a request and waits for its response. A JSON-RPC error comes
// back as *rpcError.
func (c *conn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, line, err := c.request(method, params)
	if err != nil {
		return nil, err
	}
	return c.callLine(ctx, method, id, line)
}

func (c *conn) callLine(ctx context.Context, method, id string, line []byte) (json.RawMessage, error) {
	wait, err := c.send(method, id, line, nil)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// send writes a request and returns the wait for its response. t, for a
// session/prompt, is the turn the response and the updates after it end
// (proto.go).
func (c *conn) send(method, id string, line []byte, t *turn) (func(context.Context) (json.RawMessage, error), error) {
	ch := make(chan envelope, 1)
	c.update(func() { c.pending[id] = &pendingCall{method: method, line: line, ch: ch, turn: t} })
	if err := c.write(line); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.name, method, err)
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		select {
		case e := <-ch:
			if e.Error != nil {
				return nil, fmt.Errorf("%s: %s: %w", c.name, method, e.Error)
			}
			return e.Result, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %s: no response: %w%s", c.name, method, context.Cause(ctx), c.stderrHint())
		case <-c.done:
			return nil, fmt.Errorf("%s: %s: the peer's output ended before the response%s", c.name, method, c.stderrHint())
		}
	}, nil
}

func (c *conn) stderrHint() string {
	if c.errs == nil {
		return ""
	}
	if s := strings.TrimSpace(c.errs.String()); s != "" {
		return "; its stderr ends: " + oneLine(s, 300)
	}
	return ""
}

// mark is a position in the received lines.
func (c *conn) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recv)
}

// since returns the lines received from mark on.
func (c *conn) since(mark int) []envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]envelope(nil), c.recv[mark:]...)
}

// rawLines returns every parsed line received, exactly.
func (c *conn) rawLines() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.raw...)
}

// settle waits until no line has arrived for quiet, at most max.
func (c *conn) settle(ctx context.Context, quiet, max time.Duration) {
	end := time.Now().Add(max)
	for time.Now().Before(end) {
		c.mu.Lock()
		ch, ended := c.changed, c.ended
		c.mu.Unlock()
		if ended {
			return
		}
		t := time.NewTimer(min(quiet, time.Until(end)))
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// await waits until a line received from mark on satisfies pred and
// returns the first such line. It ends early when the peer's output ends or
// ctx does; what names the awaited line in the error.
func (c *conn) await(ctx context.Context, mark int, what string, pred func(envelope) bool) (envelope, error) {
	for {
		c.mu.Lock()
		for _, e := range c.recv[mark:] {
			if pred(e) {
				c.mu.Unlock()
				return e, nil
			}
		}
		ch, ended := c.changed, c.ended
		c.mu.Unlock()
		if ended {
			return envelope{}, fmt.Errorf("%s: the peer's output ended before %s%s", c.name, what, c.stderrHint())
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return envelope{}, fmt.Errorf("%s: no %s: %w%s", c.name, what, context.Cause(ctx), c.stderrHint())
		}
	}
}

// isResponse reports whether e answers a request (a result or an error).
func isResponse(e envelope) bool { return e.Method == "" && (e.Result != nil || e.Error != nil) }

// transcript returns the run's events.
func (c *conn) transcript() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.events...)
}

// close ends the peer as a user's quit does (acpclient's Terminate): its
// stdin closed and SIGTERM at once, its process group killed after the
// close timeout. A sidecar then stops its agent's tree and writes what it
// holds; an agent ends at once, where claude-agent-acp and codex-acp,
// which ignore EOF, would cost every run the whole close timeout. How an
// agent takes EOF alone is the eof check's to judge (checkEOF), which
// closes its run's stdin and nothing else.
func (c *conn) close() {
	_, _ = c.rc.Terminate() // how it ended is nobody's verdict here
	<-c.done
}

// kill ends the peer at once: its process group is killed, for a run
// whose end nothing is judged on.
func (c *conn) kill() {
	_ = c.rc.Kill()
	<-c.done
}

// oneLine squeezes s onto one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// errCode is the JSON-RPC error code in err, or 0.
func errCode(err error) int {
	var re *rpcError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}
