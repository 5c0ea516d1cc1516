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

// ownCalls is the jsonrpc2 object stream behind the sidecar's own requests to
// the agent: objects go out through the relay's agent writer, and responses
// come in from the agent pump, which diverts every frame with an own id here.
type ownCalls struct {
	r    *Relay
	in   chan []byte
	done chan struct{}
	once sync.Once
	seq  atomic.Uint64
	conn *jsonrpc2.Conn
}

// newOwnCalls starts the jsonrpc2 connection; its reader goroutine exits when
// close is called, which Relay.Run does on its way out.
func newOwnCalls(r *Relay) *ownCalls {
	o := &ownCalls{r: r, in: make(chan []byte, 16), done: make(chan struct{})}
	o.conn = jsonrpc2.NewConn(context.Background(), o, jsonrpc2.HandlerWithError(refuse))
	return o
}

// WriteObject implements jsonrpc2.ObjectStream.
func (o *ownCalls) WriteObject(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode own request: %w", err)
	}
	o.r.trace.record(ClientToAgent, true, b, nil)
	o.r.trace.Flush()
	if err := o.r.out[ClientToAgent].writeNow(b); err != nil {
		if errors.Is(err, ErrAgentGone) {
			return fmt.Errorf("send own request: %w", err)
		}
		// An agent whose stdin fails is gone, whatever the error says.
		return fmt.Errorf("send own request: %w: %w", ErrAgentGone, err)
	}
	return nil
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
	o := r.own.Load()
	id := jsonrpc2.ID{Str: OwnIDPrefix + strconv.FormatUint(o.seq.Add(1), 10), IsString: true}
	if err := o.conn.Call(ctx, method, params, result, jsonrpc2.PickID(id)); err != nil {
		if errors.Is(err, jsonrpc2.ErrClosed) {
			return fmt.Errorf("call %s: %w", method, ErrAgentGone)
		}
		return fmt.Errorf("call %s: %w", method, err)
	}
	return nil
}
