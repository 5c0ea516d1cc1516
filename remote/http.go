package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// writeTimeout bounds each write to a client: one that stops reading for
// this long loses its stream (and is detached), never the agent's time.
const writeTimeout = 30 * time.Second

// keepAlive is how often an idle SSE stream gets a comment, so proxies on
// the way do not close it.
const keepAlive = 15 * time.Second

// post takes one client message.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	line, status, err := readMessage(r.Body, s.cfg.MaxMessage)
	if err != nil {
		if status == http.StatusBadRequest && proxy.IsBatch(line) {
			writeJSON(w, http.StatusBadRequest, proxy.ErrorResponse(nil, -32600, proxy.BatchMessage), "")
			return
		}
		http.Error(w, err.Error(), status)
		return
	}
	env, _ := proxy.Scan(line) // readMessage checked it is one JSON object
	if env.Kind == proxy.KindRequest && env.MethodIs("initialize") {
		if r.Header.Get(HeaderConnection) != "" {
			http.Error(w, "initialize is not allowed on an existing connection", http.StatusBadRequest)
			return
		}
		s.initialize(w, r, env, line)
		return
	}
	c := s.connOf(w, r)
	if c == nil {
		return
	}
	done, ok := c.hold()
	if !ok {
		http.Error(w, "the connection has ended", http.StatusGone)
		return
	}
	defer done()
	if code, err := s.accept(r.Context(), c, line, env, r.Header.Get(HeaderSession)); err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// initialize starts a connection: its host, then the host's answer, given
// back on the request with the connection's id.
func (s *Server) initialize(w http.ResponseWriter, r *http.Request, env proxy.Envelope, line []byte) {
	if string(env.ID) == "null" {
		http.Error(w, "initialize must have an id", http.StatusBadRequest)
		return
	}
	c, err := s.newConn()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	done, _ := c.hold()
	defer done()
	s.startHost(c)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.InitTimeout)
	defer cancel()
	answer, err := c.initialize(ctx, env.ID, line)
	if err != nil {
		c.Close()
		s.cfg.Log.Warn("initialize failed; the connection ends", "conn", c.id, "err", err)
		writeJSON(w, http.StatusInternalServerError, proxy.ErrorResponse(env.ID, -32603, "Initialize failed: "+err.Error()), "")
		return
	}
	writeJSON(w, http.StatusOK, answer, c.id)
}

// accept hands the host a connected client's message, after the checks
// the SDK's server makes, and moves a session a detached connection holds
// over to c for a load or resume. It returns the HTTP status of a refusal.
func (s *Server) accept(ctx context.Context, c *Conn, line []byte, env proxy.Envelope, header string) (int, error) {
	if env.Kind == proxy.KindResponse || env.Kind == proxy.KindOther {
		// An answer to the agent's request, or what the relay refuses
		// itself (a batch): the host judges it.
		if err := c.toHost(line); err != nil {
			return http.StatusGone, err
		}
		return 0, nil
	}
	route := header
	if env.SessionID.Present() {
		sid := sessionOf(line, env)
		if header != "" && header != sid {
			return http.StatusBadRequest, errors.New("mismatched " + HeaderSession)
		}
		route = sid
	}
	method := string(env.Method)
	if (method == "session/new" || method == "session/fork") && s.held(c) >= s.cfg.MaxSessions {
		return http.StatusTooManyRequests, fmt.Errorf("the connection holds %d sessions, as many as --max-sessions allows; close one first", s.cfg.MaxSessions)
	}
	if route != "" && (method == "session/load" || method == "session/resume") {
		if err := s.takeOver(ctx, c, route); err != nil {
			if errors.Is(err, errHeld) {
				return http.StatusConflict, err
			}
			return http.StatusServiceUnavailable, err
		}
	}
	if env.Kind == proxy.KindRequest {
		// A request's answer goes on the stream of its session, after what
		// the session's stream had before it: a load's replay comes before
		// the load's answer, as on stdio. (The SDK's server sends a load's
		// answer on the connection's stream, where it can overtake the
		// replay; its client reads answers on any stream.)
		c.expect(env.ID, route, method)
	}
	if err := c.toHost(line); err != nil {
		return http.StatusGone, err
	}
	return 0, nil
}

// stream serves an SSE stream: the connection's own, or a session's
// (Acp-Session-Id), from after Last-Event-ID when it is given.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(strings.ToLower(r.Header.Get("Accept")), "text/event-stream") {
		http.Error(w, "Accept must include text/event-stream", http.StatusNotAcceptable)
		return
	}
	c := s.connOf(w, r)
	if c == nil {
		return
	}
	route := r.Header.Get(HeaderSession)
	var after uint64
	resume := false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			http.Error(w, "Last-Event-ID must be a cursor this server gave", http.StatusBadRequest)
			return
		}
		after, resume = n, true
	}
	unreceive, replaced, ok := c.receive(route, resume)
	if !ok {
		http.Error(w, "the stream already has a reader", http.StatusConflict)
		return
	}
	defer unreceive()
	done, ok := c.hold()
	if !ok {
		http.Error(w, "the connection has ended", http.StatusGone)
		return
	}
	defer done()
	pos, err := c.out.start(route, false, resume, after)
	if err != nil {
		// 409: the client falls back to load or resume.
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	defer c.out.attach(route, false)()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var buf bytes.Buffer
	for {
		entries, wake, closed, err := c.out.read(route, false, pos)
		if err != nil {
			s.cfg.Log.Warn("a stream's reader fell behind what the connection keeps; ending the stream", "conn", c.id, "session", route)
			return
		}
		if len(entries) > 0 {
			buf.Reset()
			for _, e := range entries {
				buf.WriteString("id: ")
				buf.WriteString(strconv.FormatUint(e.cursor, 10))
				buf.WriteString("\ndata: ")
				buf.Write(e.msg)
				buf.WriteString("\n\n")
				pos = e.cursor
			}
			if !writeSSE(rc, w, buf.Bytes()) {
				return
			}
			continue
		}
		if closed {
			return
		}
		select {
		case <-wake:
		case <-tick.C:
			if !writeSSE(rc, w, []byte(":\n\n")) {
				return
			}
		case <-r.Context().Done():
			return
		case <-replaced:
			return
		}
	}
}

// writeSSE writes and flushes within writeTimeout.
func writeSSE(rc *http.ResponseController, w io.Writer, b []byte) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // not every ResponseWriter has deadlines; the write then waits as long as it must
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// connOf is the live connection the request's Acp-Connection-Id names; nil
// when it names none, after answering 400, 404 or 410.
func (s *Server) connOf(w http.ResponseWriter, r *http.Request) *Conn {
	id := r.Header.Get(HeaderConnection)
	if id == "" {
		http.Error(w, "missing "+HeaderConnection, http.StatusBadRequest)
		return nil
	}
	c, code := s.conn(id)
	if c == nil {
		http.Error(w, "unknown "+HeaderConnection, code)
	}
	return c
}

// delete ends a connection.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	c := s.connOf(w, r)
	if c == nil {
		return
	}
	c.Close()
	w.WriteHeader(http.StatusAccepted)
}

// readMessage reads one JSON message of at most max bytes and gives it as
// one line: a client may send it spread over lines, the host reads one per
// line.
func readMessage(r io.Reader, max int) ([]byte, int, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	if len(b) > max {
		return nil, http.StatusRequestEntityTooLarge, errors.New("the message is larger than --max-message")
	}
	return compact(b)
}

// compact checks b is one JSON object and gives it without line breaks.
// A JSON array comes back too, with its error, for a batch's answer. A
// message on one line, as every client sends, is only scanned: the host's
// relay reads it as it is.
func compact(b []byte) ([]byte, int, error) {
	line := bytes.TrimSpace(b)
	if bytes.ContainsAny(line, "\r\n") {
		var out bytes.Buffer
		if err := json.Compact(&out, line); err != nil {
			return nil, http.StatusBadRequest, errors.New("invalid JSON")
		}
		line = out.Bytes()
	}
	if _, err := proxy.Scan(line); err != nil {
		return nil, http.StatusBadRequest, errors.New("invalid JSON")
	}
	if proxy.IsBatch(line) {
		return line, http.StatusBadRequest, errBatch
	}
	if len(line) == 0 || line[0] != '{' {
		return nil, http.StatusBadRequest, errors.New("invalid JSON-RPC message")
	}
	return line, 0, nil
}

var errBatch = errors.New("invalid request: ACP has no JSON-RPC batches")

func writeJSON(w http.ResponseWriter, status int, body []byte, conn string) {
	w.Header().Set("Content-Type", "application/json")
	if conn != "" {
		w.Header().Set(HeaderConnection, conn)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client went; nothing is lost that a retry needs
}
