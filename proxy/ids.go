package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"
)

// OwnIDPrefix starts the id of every request the sidecar sends on its own.
// Clients number their requests, or use strings of their own; a string with
// this prefix cannot collide with them, so responses need no id remapping and
// the relay can take them out of the agent's stream by their first bytes.
const OwnIDPrefix = "acp-sidecar:"

var ownIDToken = []byte(`"` + OwnIDPrefix)

func isOwnID(id []byte) bool { return bytes.HasPrefix(id, ownIDToken) }

// AskIDPrefix starts the id of every request the sidecar sends as if the
// client had (CallAsClient). Unlike OwnIDPrefix's, these travel the
// client's whole way, the Hook included, both there and back, and their
// responses are taken out only on their way to the client.
const AskIDPrefix = "acp-sidecar-ask:"

var askIDToken = []byte(`"` + AskIDPrefix)

func isAskID(id []byte) bool { return bytes.HasPrefix(id, askIDToken) }

// ErrorResponse builds a JSON-RPC error response. id is the raw id token to
// echo (nil for null), so the sender gets back exactly the token it sent.
func ErrorResponse(id []byte, code int, msg string) []byte {
	if id == nil {
		id = []byte("null")
	}
	m, _ := json.Marshal(msg) // a string always marshals
	b := make([]byte, 0, len(id)+len(m)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, m...)
	b = append(b, "}}"...)
	return b
}

// ownCalls is the jsonrpc2 object stream behind the sidecar's own requests:
// objects go out through send, and responses come in from wherever the
// relay diverts the frames with the stream's ids (deliver).
type ownCalls struct {
	prefix string
	send   func(line []byte) error
	in     chan []byte
	done   chan struct{}
	once   sync.Once
	seq    atomic.Uint64
	conn   *jsonrpc2.Conn
	// params are the params of the calls on their way out, as call
	// encoded them, by id: jsonrpc2 encodes them again with json.Marshal,
	// which escapes <, > and &, and WriteObject puts these in its place.
	params sync.Map // string -> []byte
}

// newOwnCalls starts the jsonrpc2 connection of requests whose ids start
// with prefix; its reader goroutine exits when close is called, which
// Relay.Run does on its way out.
func newOwnCalls(prefix string, send func(line []byte) error) *ownCalls {
	o := &ownCalls{prefix: prefix, send: send, in: make(chan []byte, 16), done: make(chan struct{})}
	o.conn = jsonrpc2.NewConn(context.Background(), o, jsonrpc2.HandlerWithError(refuse))
	return o
}

// calls owns the sidecar's own requests and their pending answers: Call's
// connection to the current agent, replaced with each agent, and
// CallAsClient's, which travels the client's way. Their responses come in
// where the relay finds them (deliverOwn from the agent's stream, and
// deliverAsk from what is written to the client) and never reach the
// client.
type calls struct {
	own     atomic.Pointer[ownCalls] // the current agent's; replaced when a new agent starts
	toAgent *output                  // where own requests go, ahead of what waits
	trace   *Trace
	// feed hands one of CallAsClient's requests to the relay as a client
	// frame (Relay.Feed, with Run's context).
	feed func(f *Frame) error

	// asks are the calls that travel as the client's; nil until the
	// first. waiting says one may be waiting for its response.
	asksMu     sync.Mutex
	asks       *ownCalls
	asksClosed bool
	waiting    atomic.Bool
}

// newAgent gives the sidecar's calls a connection for a new agent and ends
// the old one's: calls the dead agent will never answer fail now, with
// ErrAgentGone, not at their timeouts.
func (c *calls) newAgent() {
	if old := c.own.Swap(newOwnCalls(OwnIDPrefix, c.sendOwn)); old != nil {
		old.close()
	}
}

// sendOwn writes one of the sidecar's own requests straight to the agent,
// ahead of what waits for it (output.writeNow).
func (c *calls) sendOwn(b []byte) error {
	c.trace.record(ClientToAgent, true, b, nil)
	c.trace.Flush()
	if err := c.toAgent.writeNow(b); err != nil {
		if errors.Is(err, ErrAgentGone) {
			return fmt.Errorf("send own request: %w", err)
		}
		// An agent whose stdin fails is gone, whatever the error says.
		return fmt.Errorf("send own request: %w: %w", ErrAgentGone, err)
	}
	return nil
}

// sendAsk hands one of CallAsClient's requests to the relay as a client
// frame.
func (c *calls) sendAsk(b []byte) error {
	env, err := Scan(b)
	if err != nil {
		return fmt.Errorf("send a request as the client's: %w", err)
	}
	c.trace.record(ClientToAgent, true, b, nil)
	c.trace.Flush()
	if err := c.feed(&Frame{Dir: ClientToAgent, Raw: b, Env: env}); err != nil {
		return fmt.Errorf("send a request as the client's: %w: %w", ErrAgentGone, err)
	}
	return nil
}

// WriteObject implements jsonrpc2.ObjectStream. A request of call's goes
// out with its params as call encoded them, not as jsonrpc2 did: the
// sidecar's own requests carry the client's raw values (a session's
// _meta), which reach the agent as the client sent them, and json.Marshal
// would escape their <, > and &.
func (o *ownCalls) WriteObject(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode own request: %w", err)
	}
	// jsonrpc2 hands its request in a type of its own: its id and method
	// are read back from the bytes.
	if env, err := Scan(b); err == nil && env.Kind == KindRequest {
		var id string
		if json.Unmarshal(env.ID, &id) == nil {
			if params, ok := o.params.LoadAndDelete(id); ok {
				b = requestLine(id, string(env.Method), params.([]byte))
			}
		}
	}
	return o.send(b)
}

// requestLine is a JSON-RPC request with a string id and params as given.
func requestLine(id, method string, params []byte) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	q, _ := json.Marshal(id) // a string always marshals
	b = append(b, q...)
	b = append(b, `,"method":`...)
	m, _ := json.Marshal(method) // a string always marshals
	b = append(b, m...)
	b = append(b, `,"params":`...)
	b = append(b, params...)
	return append(b, '}')
}

// encodeParams encodes a call's params as JSON that keeps <, > and & as
// they are.
func encodeParams(params any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(params); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ReadObject implements jsonrpc2.ObjectStream.
func (o *ownCalls) ReadObject(v any) error {
	select {
	case line := <-o.in:
		return json.Unmarshal(line, v)
	case <-o.done:
		return io.EOF
	}
}

// Close implements jsonrpc2.ObjectStream; the relay owns the real close.
func (o *ownCalls) Close() error { return nil }

// deliver hands a response to the waiting call. It copies the line, because
// the relay reuses its buffer, and blocks while the reader is busy: responses
// to our calls are few, and losing one would hang its caller.
func (o *ownCalls) deliver(line []byte) {
	select {
	case o.in <- bytes.Clone(line):
	case <-o.done:
	}
}

func (o *ownCalls) close() {
	o.once.Do(func() { close(o.done) })
	<-o.conn.DisconnectNotify()
}

// refuse answers anything but a response on the own stream. Nothing else is
// routed there, so this only guards against a nil handler's panic.
func refuse(ctx context.Context, c *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "acp-sidecar accepts no requests here"}
}

// Call sends a request of the sidecar's own to the agent and waits for its
// response, which never reaches the client. An error response comes back as
// *jsonrpc2.Error. Calls fail with ErrAgentGone once the agent's output has
// ended or its input fails: the caller learns that the agent died under
// the call, not which library noticed.
func (r *Relay) Call(ctx context.Context, method string, params, result any) error {
	return r.calls.call(ctx, method, params, result)
}

// call makes one Call on the current agent's connection.
func (c *calls) call(ctx context.Context, method string, params, result any) error {
	return c.own.Load().call(ctx, method, params, result)
}

func (o *ownCalls) call(ctx context.Context, method string, params, result any) error {
	id := jsonrpc2.ID{Str: o.prefix + strconv.FormatUint(o.seq.Add(1), 10), IsString: true}
	if params != nil {
		raw, err := encodeParams(params)
		if err != nil {
			return fmt.Errorf("call %s: encode params: %w", method, err)
		}
		o.params.Store(id.Str, raw)
		defer o.params.Delete(id.Str) // a call that failed before its write
	}
	if err := o.conn.Call(ctx, method, params, result, jsonrpc2.PickID(id)); err != nil {
		if errors.Is(err, jsonrpc2.ErrClosed) {
			return fmt.Errorf("call %s: %w", method, ErrAgentGone)
		}
		return fmt.Errorf("call %s: %w", method, err)
	}
	return nil
}

// CallAsClient is Call for a request that must travel as the client's
// would, for a relay with Client set: it is handed in as Feed hands a
// client frame, so the Hook sees it and its response as the client's (a
// recorder keeps it, to replay it to a restarted agent), and only on its
// way to the client is the response taken out. Its id starts with
// AskIDPrefix. Calls fail with ErrAgentGone once the relay has stopped.
func (r *Relay) CallAsClient(ctx context.Context, method string, params, result any) error {
	if err := r.run.wait(ctx); err != nil {
		return fmt.Errorf("call %s: %w", method, err)
	}
	return r.calls.asClient(ctx, method, params, result)
}

// asClient makes one CallAsClient, once Run has started: the asks'
// connection starts with the first.
func (c *calls) asClient(ctx context.Context, method string, params, result any) error {
	c.asksMu.Lock()
	if c.asks == nil {
		c.asks = newOwnCalls(AskIDPrefix, c.sendAsk)
		if c.asksClosed {
			c.asks.close()
		}
	}
	o := c.asks
	c.asksMu.Unlock()
	c.waiting.Store(true)
	return o.call(ctx, method, params, result)
}

// asking says whether a CallAsClient may be waiting for its response, so
// that what goes to the client must be looked at for it. It takes no lock:
// the agent's every frame asks.
func (c *calls) asking() bool { return c.waiting.Load() }

// deliverOwn hands a response from the agent to the Call waiting for it.
func (c *calls) deliverOwn(line []byte) { c.own.Load().deliver(line) }

// deliverAsk hands a response to the CallAsClient waiting for it.
func (c *calls) deliverAsk(line []byte) {
	c.asksMu.Lock()
	o := c.asks
	c.asksMu.Unlock()
	if o != nil {
		o.deliver(line)
	}
}

// close ends both connections, at Run's end: every call still waiting
// fails, and a CallAsClient made after fails at once.
func (c *calls) close() {
	c.own.Load().close()
	c.asksMu.Lock()
	defer c.asksMu.Unlock()
	c.asksClosed = true
	if c.asks != nil {
		c.asks.close()
	}
}
