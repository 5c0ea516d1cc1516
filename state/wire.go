package state

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The owner of the store serves the other processes on one directory over a
// unix socket, one JSON request per line and one JSON response per line, in
// order, on each connection. A client has one request in flight at a time.

type request struct {
	ID      uint64     `json:"id"`
	Op      string     `json:"op"`
	Schema  int        `json:"schema,omitempty"`
	Claims  []string   `json:"claims,omitempty"`
	Session *Session   `json:"session,omitempty"`
	SID     string     `json:"sid,omitempty"`
	Turn    *Turn      `json:"turn,omitempty"`
	Keep    int        `json:"keep,omitempty"`
	Native  string     `json:"native,omitempty"`
	Agent   *AgentInfo `json:"agent,omitempty"` // put_agent
	Name    string     `json:"name,omitempty"`  // agent
}

type response struct {
	ID     uint64     `json:"id"`
	Err    *wireError `json:"err,omitempty"`
	Schema int        `json:"schema,omitempty"`
	// Features lists, in the answer to hello, the ops an owner has beyond
	// the first version's: an older owner answers an op it lacks with
	// "unknown op", which a client cannot tell from a failure of the op.
	Features []string   `json:"features,omitempty"`
	Session  *Session   `json:"session,omitempty"`
	Sessions []Summary  `json:"sessions,omitempty"`
	Turns    []Turn     `json:"turns,omitempty"`
	ClientID string     `json:"clientId,omitempty"`
	Agent    *AgentInfo `json:"agent,omitempty"`

	// hangUp: the store cannot serve the request (badgerStore.broken); the
	// connection is closed instead of answered.
	hangUp bool
}

type wireError struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// wireCodes name the sentinels an error may carry across, in the order
// toWire tries them: "gone" (both ErrNotFound and ErrDeleted) before either.
var wireCodes = []struct {
	code     string
	sentinel error
}{
	{"gone", errGone},
	{"not_found", ErrNotFound},
	{"deleted", ErrDeleted},
	{"original_exists", ErrOriginalExists},
	{"newer_schema", ErrNewerSchema},
	{"corrupt", ErrCorrupt},
}

// featureDelete says an owner serves the "delete" op.
const featureDelete = "delete"

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	for _, c := range wireCodes {
		if errors.Is(err, c.sentinel) {
			return &wireError{Code: c.code, Msg: err.Error()}
		}
	}
	return &wireError{Code: "error", Msg: err.Error()}
}

// fromWire is the sentinel a wire error code stands for, nil for none.
func fromWire(code string) error {
	for _, c := range wireCodes {
		if c.code == code {
			return c.sentinel
		}
	}
	return nil
}

// remoteError is an error the owner returned. It reads as the owner's message
// and unwraps to the matching sentinel, so errors.Is works across processes.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// errConn marks a failure of the connection to the owner, as opposed to an
// error the owner returned. The shared store retries the write elsewhere.
var errConn = errors.New("connection to the store lost")

// socketPath is where the owner of dir listens. A unix socket path is limited
// to about 108 bytes (Windows's AF_UNIX too); a state dir too deep for
// dir/store.sock gets a socket in a private directory under the temp dir
// (socketTempDir), named by a hash of dir, which every process derives the
// same way.
func socketPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if p := filepath.Join(abs, "store.sock"); len(p) < 100 {
		return p, nil
	}
	sum := sha256.Sum256([]byte(abs))
	priv := socketTempDir()
	if err := makeDir(priv); err != nil {
		return "", err
	}
	return filepath.Join(priv, hex.EncodeToString(sum[:8])+".sock"), nil
}

// server answers requests from other processes against the store it owns.
type server struct {
	st  *badgerStore
	ln  net.Listener
	log *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]map[string]bool // connection → sessions it claims (live)
	closed bool
	wg     sync.WaitGroup
}

// serve starts listening on path. The caller holds badger's directory lock, so
// no other owner exists and a socket file left there by a killed owner is stale.
func serve(st *badgerStore, path string, log *slog.Logger) (*server, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := restrictSocket(path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	srv := &server{st: st, ln: ln, log: log, conns: map[net.Conn]map[string]bool{}}
	srv.wg.Add(1)
	go srv.acceptLoop()
	return srv, nil
}

func (srv *server) acceptLoop() {
	defer srv.wg.Done()
	for {
		c, err := srv.ln.Accept()
		if err != nil {
			return // closed
		}
		srv.mu.Lock()
		if srv.closed {
			srv.mu.Unlock()
			c.Close()
			return
		}
		srv.conns[c] = map[string]bool{}
		srv.wg.Add(1)
		srv.mu.Unlock()
		go srv.serveConn(c)
	}
}

func (srv *server) serveConn(c net.Conn) {
	defer srv.wg.Done()
	defer func() {
		srv.mu.Lock()
		claimed := srv.conns[c]
		delete(srv.conns, c)
		srv.mu.Unlock()
		c.Close()
		// Its sessions are no longer live through it.
		srv.st.feed.publish(slices.Sorted(maps.Keys(claimed))...)
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	ctx := context.Background()
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req request
		var resp response
		if err := json.Unmarshal(line, &req); err != nil {
			resp.Err = &wireError{Code: "error", Msg: "bad request: " + err.Error()}
		} else if req.Op == "watch" {
			srv.serveWatch(c, r, w, req.ID) // the connection is the feed's from now on
			return
		} else {
			resp = srv.handle(ctx, c, &req)
		}
		if resp.hangUp {
			return // the client finds the store another way, as after a kill
		}
		b, err := encode(&resp)
		if err != nil {
			b, _ = encode(&response{ID: req.ID, Err: toWire(err)})
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

func (srv *server) claim(c net.Conn, ids ...string) {
	srv.mu.Lock()
	var fresh []string
	if m := srv.conns[c]; m != nil {
		for _, id := range ids {
			if !m[id] {
				fresh = append(fresh, id)
			}
			m[id] = true
		}
	}
	srv.mu.Unlock()
	srv.st.feed.publish(fresh...) // live now
}

// unclaim stops listing a deleted session as live for any connection.
func (srv *server) unclaim(id string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, m := range srv.conns {
		delete(m, id)
	}
}

func (srv *server) handle(ctx context.Context, c net.Conn, req *request) response {
	resp := response{ID: req.ID}
	var err error
	switch req.Op {
	case "hello":
		srv.claim(c, req.Claims...)
		resp.Schema = SchemaVersion
		resp.Features = []string{featureDelete, featureWatch}
	case "put_session":
		if req.Session == nil {
			err = errors.New("put session: no session")
			break
		}
		if err = srv.st.putSession(req.Session); err == nil {
			srv.claim(c, req.Session.ClientID)
		}
	case "session":
		resp.Session, err = srv.st.Session(ctx, req.SID)
	case "sessions":
		resp.Sessions, err = srv.st.Sessions(ctx)
		srv.mu.Lock()
		for i := range resp.Sessions {
			for _, m := range srv.conns {
				resp.Sessions[i].Live = resp.Sessions[i].Live || m[resp.Sessions[i].ID]
			}
		}
		srv.mu.Unlock()
	case "put_turn":
		err = srv.st.PutTurn(ctx, req.SID, req.Turn)
	case "turns":
		resp.Turns, err = srv.st.Turns(ctx, req.SID)
	case "rollback":
		err = srv.st.RollBack(ctx, req.SID, req.Keep)
	case "client_id":
		resp.ClientID, err = srv.st.ClientID(ctx, req.Native)
	case "put_agent":
		err = srv.st.PutAgent(ctx, req.Agent)
	case "agent":
		resp.Agent, err = srv.st.Agent(ctx, req.Name)
	case "delete":
		if err = srv.st.DeleteSession(ctx, req.SID); err == nil {
			srv.unclaim(req.SID)
		}
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	resp.Err = toWire(err)
	resp.hangUp = errors.Is(err, errConn)
	return resp
}

// close stops accepting, drops every connection (clients see it and look for a
// new owner) and waits for the connection goroutines. The listener removes the
// socket file.
func (srv *server) close() {
	srv.mu.Lock()
	srv.closed = true
	srv.ln.Close()
	for c := range srv.conns {
		c.Close()
	}
	srv.mu.Unlock()
	srv.wg.Wait()
}

// owned is the owner's backend: its badger store, plus the server that lets
// the other processes in. Closing it closes the server first, so the socket is
// gone before badger's lock is released and a successor can listen.
type owned struct {
	*badgerStore
	srv *server
}

func (o *owned) Close() error {
	if o.srv != nil {
		o.srv.close()
	}
	return o.badgerStore.Close()
}

// remote is a client connection to the owner. It implements Store.
type remote struct {
	c        net.Conn
	broken   atomic.Bool // set on any failure and by Close; the connection is then done
	features []string    // the owner's, from hello

	mu   sync.Mutex // one request in flight
	r    *bufio.Reader
	next uint64
}

// dial connects to the owner at path and says hello, passing the sessions this
// process claims so the owner lists them as live.
func dial(ctx context.Context, path string, claims []string) (*remote, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConn, err)
	}
	r := &remote{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	resp, err := r.call(ctx, &request{Op: "hello", Schema: SchemaVersion, Claims: claims})
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.Schema > SchemaVersion {
		c.Close()
		return nil, fmt.Errorf("store owner speaks schema %d, this version up to %d: %w", resp.Schema, SchemaVersion, ErrNewerSchema)
	}
	r.features = resp.Features
	return r, nil
}

func (r *remote) call(ctx context.Context, req *request) (*response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken.Load() {
		return nil, fmt.Errorf("%s: %w", req.Op, errConn)
	}
	r.next++
	req.ID = r.next
	b, err := encode(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.Op, err)
	}
	dl, _ := ctx.Deadline()
	r.c.SetDeadline(dl)
	// A cancelled ctx without a deadline must still unblock the call: expire
	// the connection's deadline, which spoils the connection for good.
	stop := context.AfterFunc(ctx, func() { r.c.SetDeadline(time.Unix(1, 0)) })
	resp, err := r.roundTrip(b)
	if !stop() && ctx.Err() != nil {
		r.broken.Store(true) // the deadline was spoilt, maybe after the response
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w: %w", req.Op, errConn, err)
	}
	if resp.ID != req.ID {
		r.Close()
		return nil, fmt.Errorf("%s: %w: response %d to request %d", req.Op, errConn, resp.ID, req.ID)
	}
	if resp.Err != nil {
		return nil, &remoteError{msg: resp.Err.Msg, sentinel: fromWire(resp.Err.Code)}
	}
	return resp, nil
}

func (r *remote) roundTrip(b []byte) (*response, error) {
	if _, err := r.c.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	line, err := r.r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (r *remote) PutSession(ctx context.Context, s *Session) error {
	_, err := r.call(ctx, &request{Op: "put_session", Session: s})
	return err
}

func (r *remote) Session(ctx context.Context, id string) (*Session, error) {
	resp, err := r.call(ctx, &request{Op: "session", SID: id})
	if err != nil {
		return nil, err
	}
	return resp.Session, nil
}

func (r *remote) Sessions(ctx context.Context) ([]Summary, error) {
	resp, err := r.call(ctx, &request{Op: "sessions"})
	if err != nil {
		return nil, err
	}
	return resp.Sessions, nil
}

func (r *remote) PutTurn(ctx context.Context, sessionID string, t *Turn) error {
	_, err := r.call(ctx, &request{Op: "put_turn", SID: sessionID, Turn: t})
	return err
}

func (r *remote) Turns(ctx context.Context, sessionID string) ([]Turn, error) {
	resp, err := r.call(ctx, &request{Op: "turns", SID: sessionID})
	if err != nil {
		return nil, err
	}
	return resp.Turns, nil
}

func (r *remote) RollBack(ctx context.Context, sessionID string, keep int) error {
	_, err := r.call(ctx, &request{Op: "rollback", SID: sessionID, Keep: keep})
	return err
}

func (r *remote) ClientID(ctx context.Context, nativeID string) (string, error) {
	resp, err := r.call(ctx, &request{Op: "client_id", Native: nativeID})
	if err != nil {
		return "", err
	}
	return resp.ClientID, nil
}

func (r *remote) PutAgent(ctx context.Context, a *AgentInfo) error {
	_, err := r.call(ctx, &request{Op: "put_agent", Agent: a})
	return err
}

func (r *remote) Agent(ctx context.Context, name string) (*AgentInfo, error) {
	resp, err := r.call(ctx, &request{Op: "agent", Name: name})
	if err != nil {
		return nil, err
	}
	return resp.Agent, nil
}

// errOwnerCannotDelete: the owner is an older acp-sidecar without the delete
// op. Nothing is sent; the delete fails rather than wait for an owner that
// may never change.
var errOwnerCannotDelete = errors.New("the process that owns the store is an older acp-sidecar that cannot delete sessions; stop it (or every sidecar on this state dir) and try again")

// DeleteSession asks the owner to delete, and returns once it has: the owner
// answers after the data left its disk.
func (r *remote) DeleteSession(ctx context.Context, id string) error {
	if !slices.Contains(r.features, featureDelete) {
		return fmt.Errorf("delete session %s: %w", id, errOwnerCannotDelete)
	}
	_, err := r.call(ctx, &request{Op: "delete", SID: id})
	return err
}

// Flush: the owner answers a write after badger took it, so there is nothing
// left to wait for.
func (r *remote) Flush(ctx context.Context) error { return nil }

// Close does not wait for a request in flight: closing the connection ends it,
// which is what the shared store needs from a hung owner.
func (r *remote) Close() error {
	r.broken.Store(true)
	return r.c.Close()
}
