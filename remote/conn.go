package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// A Conn is one ACP connection: what its client sends reaches the host as
// lines on Read, and what the host writes goes out as server messages, each
// with a cursor, on the connection's streams. It outlives the HTTP
// requests, SSE streams and WebSockets that carry it: with none left it is
// detached, and it ends when its host does, when the client deletes it, or
// once it has stayed detached for the server's detach TTL.
type Conn struct {
	id  string
	srv *Server
	out *outbox

	// received counts the client's messages the connection took after its
	// first (initialize or stream/resume): a client that resumes is told
	// it, and sends again what came after.
	received uint64

	mu sync.Mutex
	// host is the stack behind the connection: its own, started at its
	// initialize, or one it took over from a detached connection.
	host *Host
	// pending: the client's requests still unanswered, by raw id, with
	// the stream their answer goes to and their method.
	pending map[string]pendingRequest
	// initID is the raw id of the initialize whose answer goes back on
	// the request that carried it (initAnswer), not on a stream.
	initID     []byte
	initAnswer chan []byte
	// active counts what carries the connection now: streams, sockets and
	// POSTs in flight. At zero the connection is detached, and the timer
	// ends it after the TTL.
	active int
	timer  *time.Timer
	// receivers: the streams with a reader now, by route, each with what
	// ends it.
	receivers map[string]*receiver
	closed    bool
	done      chan struct{} // closed when the connection ends
	// init is the params of the client's initialize: a connection takes
	// over another's host only if their clients asked for the same.
	init []byte
}

type pendingRequest struct {
	route  string
	method string
}

func newConn(srv *Server, id string) *Conn {
	c := &Conn{
		id: id, srv: srv, out: newOutbox(srv.cfg.Retain),
		pending: map[string]pendingRequest{}, receivers: map[string]*receiver{},
		done: make(chan struct{}),
	}
	c.host = newHost(id, c)
	return c
}

// Close ends the connection: its host reads EOF, as a stdio host does when
// its editor goes, and every stream ends once it has what was kept.
func (c *Conn) Close() error {
	h := c.end()
	if h == nil {
		return nil
	}
	return h.inW.Close()
}

// end ends the connection but not its host, which it returns (nil when it
// had ended already).
func (c *Conn) end() *Host {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	close(c.done)
	h := c.host
	c.mu.Unlock()
	c.srv.forget(c)
	c.out.close()
	return h
}

// fromHost routes one server message, as the SDK's server does: an answer
// to the stream of the request it answers, a request or notification to
// its session's stream, anything else to the connection's own.
func (c *Conn) fromHost(msg []byte) {
	env, err := proxy.Scan(msg)
	if err != nil {
		// The host's relay writes only valid frames; a line that is not
		// one still goes out, on the connection's stream, for the client
		// to refuse: the transport does not judge it.
		c.out.add("", msg)
		return
	}
	route := ""
	if env.Kind == proxy.KindResponse {
		c.mu.Lock()
		if c.initID != nil && bytes.Equal(env.ID, c.initID) {
			c.initID = nil
			ch := c.initAnswer
			c.mu.Unlock()
			ch <- msg
			return
		}
		p, ok := c.pending[string(env.ID)]
		delete(c.pending, string(env.ID))
		c.mu.Unlock()
		if ok {
			route = p.route
			if sid := openedSession(p.method, msg); sid != "" {
				c.srv.claim(c, sid)
			}
		}
		c.out.add(route, msg)
		c.signalPending()
		return
	}
	if env.SessionID.Present() {
		route = sessionOf(msg, env)
		c.srv.claim(c, route)
	}
	c.out.add(route, msg)
}

// signalPending wakes whoever waits for the connection's requests to end
// (a handover).
func (c *Conn) signalPending() {
	c.out.mu.Lock()
	c.out.signal()
	c.out.mu.Unlock()
}

// toHost hands the host one client message, a line of valid JSON.
func (c *Conn) toHost(line []byte) error {
	c.mu.Lock()
	h := c.host
	c.mu.Unlock()
	return h.write(line)
}

var errGone = errors.New("the connection has ended")

// expect notes a client request whose answer goes to route.
func (c *Conn) expect(id []byte, route, method string) {
	c.mu.Lock()
	c.pending[string(id)] = pendingRequest{route: route, method: method}
	c.mu.Unlock()
}

// hostIs says whether h is c's host still.
func (c *Conn) hostIs(h *Host) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.host == h
}

// initialize hands the host the client's initialize and waits for its
// answer, which the transport gives back on the request itself.
func (c *Conn) initialize(ctx context.Context, id, line []byte) ([]byte, error) {
	ch := make(chan []byte, 1)
	var req struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(line, &req) // the line is a JSON object; params absent is params nil
	c.mu.Lock()
	c.initID, c.initAnswer = bytes.Clone(id), ch
	c.init = req.Params
	c.mu.Unlock()
	if err := c.toHost(line); err != nil {
		return nil, err
	}
	select {
	case msg := <-ch:
		return c.srv.describe(msg), nil
	case <-c.host.done:
		return nil, errors.New("the agent ended before it answered initialize")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// hold notes one more carrier of the connection (a stream, a socket, a
// POST); the returned func lets it go. It fails on a connection that has
// ended.
func (c *Conn) hold() (func(), bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	c.active++
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	var once sync.Once
	return func() { once.Do(c.release) }, true
}

func (c *Conn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	if c.active > 0 || c.closed {
		return
	}
	c.srv.cfg.Log.Info("connection detached; its sessions stay live", "conn", c.id, "ttl", c.srv.cfg.DetachTTL.String())
	c.timer = time.AfterFunc(c.srv.cfg.DetachTTL, func() {
		c.mu.Lock()
		expired := c.active == 0 && !c.closed
		c.mu.Unlock()
		if expired {
			c.srv.cfg.Log.Info("connection stayed detached past its ttl; ending it", "conn", c.id)
			c.Close()
		}
	})
}

// attached says whether something carries the connection now; an ended
// connection is not attached, though its host may still be ending.
func (c *Conn) attached() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active > 0 && !c.closed
}

// A receiver is the one reader of a stream; its stop channel is closed
// when a newer reader takes the stream over.
type receiver struct{ stop chan struct{} }

// receive claims route's stream for one reader. A stream that has one is
// refused (false), unless replace is set: a client that resumes from a
// cursor is the stream's reader now, though the server has yet to see its
// old stream end. The returned func lets the stream go; stop is closed
// when another reader takes it.
func (c *Conn) receive(route string, replace bool) (release func(), stop <-chan struct{}, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.receivers[route]; old != nil {
		if !replace {
			return nil, nil, false
		}
		close(old.stop)
	}
	r := &receiver{stop: make(chan struct{})}
	c.receivers[route] = r
	return func() {
		c.mu.Lock()
		if c.receivers[route] == r {
			delete(c.receivers, route)
		}
		c.mu.Unlock()
	}, r.stop, true
}

// drain waits until no request of the client's is unanswered, the
// connection ends, or ctx ends.
func (c *Conn) drain(ctx context.Context) error {
	for {
		c.out.mu.Lock()
		wake := c.out.waiter()
		c.out.mu.Unlock()
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-wake:
		case <-c.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// openedSession is the session id an answer to a request that opens one
// (new, load, resume, fork) carries: in its result, or for a load or
// resume, none (the request named it).
func openedSession(method string, msg []byte) string {
	switch method {
	case "session/new", "session/fork":
	default:
		return ""
	}
	var r struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(msg, &r) != nil {
		return ""
	}
	return r.Result.SessionID
}

// sessionOf is the string value of params.sessionId that env spans.
func sessionOf(msg []byte, env proxy.Envelope) string {
	raw := msg[env.SessionID.Start:env.SessionID.End]
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]) // no escapes: the bytes are the string
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
