package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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

	// The host reads the client's lines from in; the server writes them
	// to inW, one whole line at a time (inMu).
	in   *io.PipeReader
	inW  *io.PipeWriter
	inMu sync.Mutex

	// received counts the client's messages the connection took after its
	// first (initialize or stream/resume): a client that resumes is told
	// it, and sends again what came after.
	received uint64

	// partial is the host's unfinished line; only Write touches it, and
	// the host writes from one goroutine at a time (the relay's writer).
	partial []byte

	mu sync.Mutex
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
	// receivers: the streams with a reader now, by route.
	receivers map[string]bool
	closed    bool
	done      chan struct{} // closed when the connection ends
	hostDone  chan struct{} // closed when the host's Open returns
}

type pendingRequest struct {
	route  string
	method string
}

func newConn(srv *Server, id string) *Conn {
	r, w := io.Pipe()
	return &Conn{
		id: id, srv: srv, out: newOutbox(srv.cfg.Retain), in: r, inW: w,
		pending: map[string]pendingRequest{}, receivers: map[string]bool{},
		done: make(chan struct{}), hostDone: make(chan struct{}),
	}
}

// ID is the connection's Acp-Connection-Id.
func (c *Conn) ID() string { return c.id }

// Read gives the host the client's messages, one per line.
func (c *Conn) Read(p []byte) (int, error) { return c.in.Read(p) }

// Close ends the connection: the host reads EOF, as a stdio host does when
// its editor goes, and every stream ends once it has what was kept.
func (c *Conn) Close() error {
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
	c.mu.Unlock()
	c.srv.forget(c)
	c.out.close()
	return c.inW.Close()
}

// Write takes the host's output: whole lines, each a server message. A
// line is never split across messages; an unfinished one waits for its
// end.
func (c *Conn) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			break
		}
		line := p[:i]
		if len(c.partial) > 0 {
			line = append(c.partial, line...)
			c.partial = nil
		} else {
			line = bytes.Clone(line)
		}
		p = p[i+1:]
		if len(bytes.TrimSpace(line)) > 0 {
			c.fromHost(line)
		}
	}
	return n, nil
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
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if _, err := c.inW.Write(append(line, '\n')); err != nil {
		return errGone
	}
	return nil
}

var errGone = errors.New("the connection has ended")

// expect notes a client request whose answer goes to route.
func (c *Conn) expect(id []byte, route, method string) {
	c.mu.Lock()
	c.pending[string(id)] = pendingRequest{route: route, method: method}
	c.mu.Unlock()
}

// initialize hands the host the client's initialize and waits for its
// answer, which the transport gives back on the request itself.
func (c *Conn) initialize(ctx context.Context, id, line []byte) ([]byte, error) {
	ch := make(chan []byte, 1)
	c.mu.Lock()
	c.initID, c.initAnswer = bytes.Clone(id), ch
	c.mu.Unlock()
	if err := c.toHost(line); err != nil {
		return nil, err
	}
	select {
	case msg := <-ch:
		return c.srv.describe(msg), nil
	case <-c.hostDone:
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

// detached says whether nothing carries the connection now.
func (c *Conn) detached() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active == 0 && !c.closed
}

// receive claims route's stream for one reader; false when it has one.
func (c *Conn) receive(route string) (func(), bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.receivers[route] {
		return nil, false
	}
	c.receivers[route] = true
	return func() {
		c.mu.Lock()
		delete(c.receivers, route)
		c.mu.Unlock()
	}, true
}

// drain waits until no request of the client's is unanswered, the
// connection ends, or ctx ends.
func (c *Conn) drain(ctx context.Context) error {
	for {
		c.out.mu.Lock()
		wake := c.out.wake
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
	var s string
	if json.Unmarshal(msg[env.SessionID.Start:env.SessionID.End], &s) != nil {
		return ""
	}
	return s
}
