package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The SDK transport's headers.
const (
	HeaderConnection = "Acp-Connection-Id"
	HeaderSession    = "Acp-Session-Id"
)

// Config is a server's.
type Config struct {
	// Token is the bearer token every request must present (Authorization:
	// Bearer TOKEN), compared in constant time and never logged.
	Token string
	// Open runs a new connection's host until it ends: it reads the
	// client's lines from h and writes the server's to h. The server calls
	// it on its own goroutine once the connection's initialize arrives.
	Open func(ctx context.Context, h *Host)
	// MaxMessage is the largest message in bytes either way.
	MaxMessage int
	// MaxConnections bounds the connections, attached or detached.
	MaxConnections int
	// MaxSessions bounds the sessions one connection opens.
	MaxSessions int
	// Retain bounds what each connection keeps for streams that resume.
	Retain Retention
	// DetachTTL is how long a connection nothing carries stays live.
	DetachTTL time.Duration
	// InitTimeout bounds the wait for the host's answer to initialize, and
	// a WebSocket's wait for its first frame.
	InitTimeout time.Duration
	// Heartbeat is how often a WebSocket is pinged, and how long its pong
	// may take.
	Heartbeat time.Duration
	Log       *slog.Logger
}

// Defaults for what a Config leaves zero.
const (
	DefaultMaxMessage     = 64 << 20
	DefaultMaxConnections = 64
	DefaultMaxSessions    = 64
	DefaultDetachTTL      = 10 * time.Minute
	DefaultInitTimeout    = 2 * time.Minute
)

// Server serves ACP connections over Streamable HTTP and WebSocket on one
// handler. It owns its connections and their hosts' goroutines: Close ends
// them all and waits for the hosts.
type Server struct {
	cfg Config
	// ctx is what the hosts run under; Close cancels it after the
	// connections have ended. A server is a process-long owner.
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	conns map[string]*Conn
	gone  map[string]bool // connections that ended: 410, not 404
	// goneOrder is gone's keys, oldest first: the newest maxGone are
	// remembered, so a long-lived server's memory stays bounded.
	goneOrder []string
	// owner is which connection holds each session it has seen.
	owner   map[string]*Conn
	closing bool // Close began: no new connection
	hosts   sync.WaitGroup
}

// NewServer makes a server; it serves once mounted on an http.Server.
func NewServer(cfg Config) *Server {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.DetachTTL <= 0 {
		cfg.DetachTTL = DefaultDetachTTL
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = DefaultInitTimeout
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 30 * time.Second
	}
	if cfg.Retain.Messages <= 0 {
		cfg.Retain.Messages = DefaultRetention.Messages
	}
	if cfg.Retain.Bytes <= 0 {
		cfg.Retain.Bytes = DefaultRetention.Bytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, ctx: ctx, cancel: cancel, conns: map[string]*Conn{}, gone: map[string]bool{}, owner: map[string]*Conn{}}
}

// NewToken makes a bearer token: 32 random bytes in hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Close ends every connection and waits until their hosts have returned,
// or ctx ends.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*Conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	done := make(chan struct{})
	go func() { s.hosts.Wait(); close(done) }()
	defer s.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the connections' agents did not end: %w", ctx.Err())
	}
}

// ServeHTTP serves one request: a POST of a client message, a GET of an SSE
// stream or a WebSocket, a DELETE of a connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="acp-sidecar"`)
		http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "requests from another origin are refused", http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r)
	case http.MethodGet:
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			s.websocket(w, r)
			return
		}
		s.stream(w, r)
	case http.MethodDelete:
		s.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// authorized compares the request's bearer token in constant time.
func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || s.cfg.Token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// sameOrigin refuses what a browser sends from another site: a request
// with an Origin whose host is not the one the request was sent to.
// Clients that are not browsers send no Origin.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// newConn registers a connection for a new client, or refuses one past
// the limit.
func (s *Server) newConn() (*Conn, error) {
	id, err := NewToken()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errClosing
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		return nil, errTooMany
	}
	c := newConn(s, id[:32])
	s.conns[c.id] = c
	return c, nil
}

// maxGone is how many ended connections get 410 rather than 404.
const maxGone = 4096

var errClosing = errors.New("the server is shutting down")

var errTooMany = errors.New("the server holds as many connections as --max-connections allows")

// startHost runs c's host on a goroutine the server owns. When the host
// returns (its agent is gone for good), the connection it serves then
// ends.
func (s *Server) startHost(c *Conn) {
	h := c.host
	s.hosts.Add(1)
	go func() {
		defer s.hosts.Done()
		s.cfg.Open(s.ctx, h)
		close(h.done)
		if o := h.owner(); o.hostIs(h) {
			o.Close()
			s.release(o)
		}
	}()
}

// conn finds a live connection: 404 for one never known, 410 for one that
// ended.
func (s *Server) conn(id string) (*Conn, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[id]; ok {
		return c, 0
	}
	if s.gone[id] {
		return nil, http.StatusGone
	}
	return nil, http.StatusNotFound
}

// forget moves an ended connection to the gone set.
func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c.id] == c {
		delete(s.conns, c.id)
		s.gone[c.id] = true
		s.goneOrder = append(s.goneOrder, c.id)
		if len(s.goneOrder) > maxGone {
			delete(s.gone, s.goneOrder[0])
			s.goneOrder = s.goneOrder[1:]
		}
	}
}

// claim notes that c holds session sid, unless another connection does.
func (s *Server) claim(c *Conn, sid string) {
	if sid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.owner[sid]; !ok {
		s.owner[sid] = c
	}
}

// held counts the sessions c holds.
func (s *Server) held(c *Conn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, o := range s.owner {
		if o == c {
			n++
		}
	}
	return n
}

// release lets go of every session c held, once its host has ended.
func (s *Server) release(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sid, o := range s.owner {
		if o == c {
			delete(s.owner, sid)
		}
	}
}

// takeOver makes c the holder of sid for a load or resume. A session held
// by another connection that is detached comes over once that
// connection's requests are answered: with its host, native session and
// agent as they are, when c is fresh and its client asked initialize for
// what that one's did; else that connection ends with its agent, the
// record is whole, and c's own host opens the session from it. A session
// held by a connection that is still attached stays there (errHeld).
func (s *Server) takeOver(ctx context.Context, c *Conn, sid string) error {
	s.mu.Lock()
	o, ok := s.owner[sid]
	s.mu.Unlock()
	if !ok || o == c {
		s.claim(c, sid)
		return nil
	}
	if o.attached() {
		return errHeld
	}
	if err := o.drain(ctx); err != nil {
		return err
	}
	if s.adopt(c, o) {
		s.cfg.Log.Info("a new connection took over a detached one's agent and sessions", "session", sid, "from", o.id, "to", c.id)
		return nil
	}
	s.cfg.Log.Info("a new connection loads a session a detached one holds; that one ends with its agent", "session", sid, "from", o.id, "to", c.id)
	o.Close()
	select {
	case <-o.host.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.claim(c, sid)
	return nil
}

// adopt moves o's host, and every session o holds, to c, and ends c's own
// host, when c holds no session yet and its client's initialize asked for
// what o's did. It reports whether it did.
func (s *Server) adopt(c, o *Conn) bool {
	s.mu.Lock()
	for _, oc := range s.owner {
		if oc == c {
			s.mu.Unlock()
			return false
		}
	}
	s.mu.Unlock()
	if c.init == nil || !bytes.Equal(c.init, o.init) {
		return false
	}
	h := o.end()
	if h == nil {
		return false
	}
	c.mu.Lock()
	own := c.host
	c.host = h
	c.mu.Unlock()
	h.mu.Lock()
	h.conn = c
	h.mu.Unlock()
	s.mu.Lock()
	for sid, oc := range s.owner {
		if oc == o {
			s.owner[sid] = c
		}
	}
	s.mu.Unlock()
	// c's own agent has nothing to do: it stops as on its editor's EOF.
	own.inW.Close()
	return true
}

var errHeld = errors.New("the session is attached to another connection")

// describe adds what the transport keeps to an initialize answer's result
// _meta (transport.resumable, the resumable transport RFD's names). An
// answer it cannot read goes back as it came.
func (s *Server) describe(msg []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return msg
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(m["result"], &result) != nil || result == nil {
		return msg
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := result["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return msg
	}
	t := map[string]any{"resumable": map[string]any{
		"retentionMessages": s.cfg.Retain.Messages,
		"retentionSeconds":  int(s.cfg.DetachTTL.Seconds()),
	}}
	tb, _ := json.Marshal(t) // plain values always marshal
	meta["transport"] = tb
	if result["_meta"], _ = json.Marshal(meta); result["_meta"] == nil {
		return msg
	}
	if m["result"], _ = json.Marshal(result); m["result"] == nil {
		return msg
	}
	out, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	return out
}
