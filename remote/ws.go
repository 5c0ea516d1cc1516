package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/coder/websocket"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// ResumeMethod is a WebSocket's first frame when it carries on a
// connection (its Acp-Connection-Id on the upgrade) from a cursor: a
// request whose params are {"cursor": N}, N the count of server messages
// the client had, answered with {"cursor": N, "received": M} before the
// messages after it, or with an error when they are no longer kept. M is
// the count of the client's messages the connection took (after its
// first), so the client sends again the ones after M.
const ResumeMethod = "stream/resume"

// wsRoute is the receiver key of a connection's WebSocket, which carries
// every stream at once.
const wsRoute = "\x00websocket"

// websocket serves a WebSocket: a new connection, whose first frame is
// initialize, or with Acp-Connection-Id an existing one, whose first frame
// is stream/resume.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	var c *Conn
	fresh := r.Header.Get(HeaderConnection) == ""
	if fresh {
		var err error
		if c, err = s.newConn(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	} else {
		var code int
		if c, code = s.conn(r.Header.Get(HeaderConnection)); c == nil {
			http.Error(w, "unknown "+HeaderConnection, code)
			return
		}
	}
	// A socket that resumes takes over from one the server has yet to see
	// end.
	unreceive, replaced, ok := c.receive(wsRoute, !fresh)
	if !ok {
		http.Error(w, "the connection already has a WebSocket", http.StatusConflict)
		return
	}
	defer unreceive()
	done, ok := c.hold()
	if !ok {
		http.Error(w, "the connection has ended", http.StatusGone)
		return
	}
	defer done()
	w.Header().Set(HeaderConnection, c.id)
	// The Origin was checked with the token (sameOrigin).
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		if fresh {
			c.Close()
		}
		return
	}
	ws.SetReadLimit(int64(s.cfg.MaxMessage))
	ctx := r.Context()
	pos, err := s.openSocket(ctx, ws, c, fresh)
	if err != nil {
		if fresh {
			c.Close()
		}
		s.cfg.Log.Info("a WebSocket was refused", "conn", c.id, "err", err)
		ws.Close(websocket.StatusPolicyViolation, truncate(err.Error()))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-replaced:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.runSocket(ctx, ws, tcpOf(r.Context()), c, pos)
}

// openSocket reads a socket's first frame within the init timeout and
// answers it: the host's initialize answer, or stream/resume's. It returns
// the cursor the socket's messages start after.
func (s *Server) openSocket(ctx context.Context, ws *websocket.Conn, c *Conn, fresh bool) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.InitTimeout)
	defer cancel()
	typ, b, err := ws.Read(ctx)
	if err != nil {
		return 0, fmt.Errorf("no first frame: %w", err)
	}
	if typ != websocket.MessageText {
		return 0, errors.New("frames are text")
	}
	line, _, err := compact(b)
	if err != nil {
		return 0, err
	}
	env, _ := proxy.Scan(line)
	if fresh {
		if env.Kind != proxy.KindRequest || !env.MethodIs("initialize") || string(env.ID) == "null" {
			return 0, errors.New("the first message must be initialize, with an id")
		}
		s.startHost(c)
		answer, err := c.initialize(ctx, env.ID, line)
		if err != nil {
			return 0, fmt.Errorf("initialize: %w", err)
		}
		return 0, ws.Write(ctx, websocket.MessageText, answer)
	}
	if env.Kind != proxy.KindRequest || !env.MethodIs(ResumeMethod) {
		return 0, errors.New("the first message on an existing connection must be " + ResumeMethod)
	}
	var req struct {
		Params struct {
			Cursor uint64 `json:"cursor"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return 0, fmt.Errorf("%s params: %w", ResumeMethod, err)
	}
	pos, err := c.out.start(wsRoute, true, true, req.Params.Cursor)
	if err != nil {
		_ = ws.Write(ctx, websocket.MessageText, proxy.ErrorResponse(env.ID, -32000, err.Error())) // the close that follows says it too
		return 0, err
	}
	c.mu.Lock()
	received := c.received
	c.mu.Unlock()
	answer := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"cursor":%d,"received":%d}}`, env.ID, pos, received)
	return pos, ws.Write(ctx, websocket.MessageText, answer)
}

// runSocket carries the connection on ws until either side ends: the
// connection's messages out after pos, the client's in.
func (s *Server) runSocket(ctx context.Context, ws *websocket.Conn, tcp *net.TCPConn, c *Conn, pos uint64) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel()
		s.pump(ctx, ws, tcp, c, pos)
	}()
	// A client that stops answering pings (gone without a close, a
	// half-open connection) is dropped: the connection is then detached.
	go func() {
		defer wg.Done()
		heartbeat(ctx, ws, s.cfg.Heartbeat, s.cfg.Log)
	}()
	// The pump ends with ctx; it must end before the socket's receiver is
	// let go, or a resumed socket would find it still taken.
	defer func() {
		cancel()
		wg.Wait()
	}()
	for {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
				s.cfg.Log.Warn("a client sent a message larger than --max-message; its socket is closed", "conn", c.id)
			}
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		c.mu.Lock()
		c.received++
		c.mu.Unlock()
		line, _, err := compact(b)
		if err != nil && line == nil {
			c.out.add("", proxy.ErrorResponse(nil, -32700, "Parse error: "+err.Error()))
			continue
		}
		env, _ := proxy.Scan(line)
		if env.Kind == proxy.KindRequest && env.MethodIs("initialize") {
			c.out.add("", proxy.ErrorResponse(env.ID, -32600, "initialize is not allowed on an existing connection"))
			continue
		}
		if code, err := s.accept(ctx, c, line, env, ""); err != nil {
			if code == http.StatusGone {
				return
			}
			if env.Kind == proxy.KindRequest {
				c.out.add("", proxy.ErrorResponse(env.ID, -32603, err.Error()))
			}
		}
	}
}

// pump writes the connection's messages after pos to ws, in order, until
// the connection or the socket ends. What is ready together goes out
// corked on tcp (nil: frame by frame).
func (s *Server) pump(ctx context.Context, ws *websocket.Conn, tcp *net.TCPConn, c *Conn, pos uint64) {
	defer c.out.attach(wsRoute, true)()
	for {
		entries, wake, closed, err := c.out.read(wsRoute, true, pos)
		if err != nil {
			ws.Close(websocket.StatusPolicyViolation, "the client fell behind what the connection keeps")
			return
		}
		// One bound for what is ready together: a timer per message
		// would cost more than the write.
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		corked := len(entries) > 1 && cork(tcp, true)
		for _, e := range entries {
			if err := ws.Write(wctx, websocket.MessageText, e.msg); err != nil {
				cancel()
				return
			}
			pos = e.cursor
		}
		if corked {
			// Fails only on a socket already gone, which the next
			// write reports; the kernel sends a held segment within
			// 200 ms in any case.
			cork(tcp, false)
		}
		cancel()
		if len(entries) > 0 {
			continue
		}
		if closed {
			ws.Close(websocket.StatusGoingAway, "the connection has ended")
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// truncate keeps a close reason within the 123 bytes a close frame allows.
func truncate(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}
