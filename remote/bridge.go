package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// BridgeConfig is a stdio bridge's.
type BridgeConfig struct {
	// URLs are the servers, tried in order: http(s):// or ws(s)://, the
	// bridge speaks WebSocket to each.
	URLs  []string
	Token string
	// MaxMessage is the largest message either way.
	MaxMessage int
	// HoldTimeout is how long the editor's requests wait while no server
	// can be reached, before each gets an error.
	HoldTimeout time.Duration
	// Heartbeat is how often the bridge pings the server, and how long it
	// waits for the pong: a connection that stops answering (a half-open
	// TCP connection, a network that drops packets silently) is dropped
	// and resumed, not waited on forever.
	Heartbeat time.Duration
	Log       *slog.Logger
}

// Defaults for what a BridgeConfig leaves zero.
const (
	DefaultHoldTimeout = 10 * time.Minute
	DefaultHeartbeat   = 15 * time.Second
	// maxUnacked bounds the editor's messages the bridge keeps to send
	// again after a resume: the server says how many it had.
	maxUnacked = 4096
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	// dialTries is how many times in a row a server may be unreachable
	// before the bridge goes on to the next.
	dialTries = 3
)

// ownPrefix starts the ids of the bridge's own requests.
const ownPrefix = "acp-sidecar-connect:"

// Bridge speaks ACP on stdio to an editor (in, out) and over WebSocket to
// a server, until the editor closes in. When the network drops it
// reconnects with backoff and resumes the connection's stream from the last
// cursor it had, sending again what the server did not get, so the editor
// sees latency, never an error or a message twice. When a server cannot
// resume (it restarted, the connection outlived its ttl, the cursor fell
// out of what it keeps, or it is gone and the next URL takes over), the
// bridge opens a fresh connection and reattaches each open session
// (reattach.go).
func Bridge(ctx context.Context, cfg BridgeConfig, in io.Reader, out io.Writer) error {
	if len(cfg.URLs) == 0 {
		return errors.New("connect: no server URL")
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.HoldTimeout <= 0 {
		cfg.HoldTimeout = DefaultHoldTimeout
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b := &bridge{cfg: cfg, out: bufio.NewWriter(out), sessions: map[string]sessionParams{}, opening: map[string]sessionParams{}, inflight: map[string]bool{}, own: map[string]ownCall{}, hushed: map[string]bool{}}
	lines := make(chan []byte, 64)
	readErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { readErr <- readLines(ctx, in, cfg.MaxMessage, lines) }()
	err := b.run(ctx, lines)
	cancel()
	// The reader ends at the editor's EOF, which ended run, or, when run
	// ended on its own (the server refused the token), once in is closed
	// under it.
	if err != nil {
		if c, ok := in.(io.Closer); ok {
			c.Close() // the bridge is done with the editor's input
		}
	}
	if rerr := <-readErr; err == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
		err = rerr
	}
	return err
}

// readLines sends the editor's lines to lines, and closes it at EOF.
func readLines(ctx context.Context, in io.Reader, max int, lines chan<- []byte) error {
	defer close(lines)
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			full := bytes.Clone(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
				if len(full) > max+1 {
					return fmt.Errorf("the editor sent a line longer than --max-message (%d bytes)", max)
				}
			}
			line = full
		} else {
			line = bytes.Clone(line)
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			select {
			case lines <- t:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read the editor's input: %w", err)
		}
	}
}

// bridge is Bridge's state. run's goroutine owns all of it.
type bridge struct {
	cfg BridgeConfig
	out *bufio.Writer

	url    int    // the server in use, an index of cfg.URLs
	connID string // its connection; "" before the first
	cursor uint64 // server messages had on connID
	// unacked: the editor's messages sent on connID, the first with
	// sequence number ackBase+1.
	unacked [][]byte
	ackBase uint64
	sent    uint64 // the editor's messages sent on connID

	initLine    []byte // the editor's initialize, for a fresh connection
	initialized bool   // the editor has its initialize answer
	v2          bool   // the connection speaks ACP v2: a session comes back by resume
	// sessions: the sessions open on the connection, with what opened them;
	// opening: requests that open one, by raw id, until answered.
	sessions map[string]sessionParams
	opening  map[string]sessionParams
	inflight map[string]bool    // the editor's requests unanswered, by raw id
	own      map[string]ownCall // the bridge's own requests, by raw id
	hushed   map[string]bool    // sessions whose replay the editor already has
	queue    [][]byte           // the editor's messages waiting for a server
	// reattaching counts the sessions of a fresh connection not yet back;
	// the editor's messages wait for them.
	reattaching int
	// retries: sessions whose reattach is asked again when retryTimer
	// fires (a fleet's lease still held by a host that died).
	retries    []string
	retryTimer *time.Timer
	awaySince  time.Time
	seq        int
}

// run connects, carries, and reconnects, until the editor goes.
func (b *bridge) run(ctx context.Context, lines <-chan []byte) error {
	// A connection starts with the editor's initialize.
	for b.initLine == nil {
		line, ok := <-lines
		if !ok {
			return nil
		}
		env, err := proxy.Scan(line)
		if err != nil || env.Kind != proxy.KindRequest || !env.MethodIs("initialize") {
			b.toEditor(proxy.ErrorResponse(idOrNil(env), -32600, "the first message must be initialize"))
			continue
		}
		b.initLine = line
	}
	fails := 0
	delay := backoffMin
	b.awaySince = time.Now()
	for {
		ws, err := b.connect(ctx)
		if err != nil {
			var fatal *fatalError
			if errors.As(err, &fatal) {
				b.failQueued(fatal.Error())
				return err
			}
			b.cfg.Log.Warn("server unreachable", "url", b.cfg.URLs[b.url], "err", err)
			if fails++; fails >= dialTries && len(b.cfg.URLs) > 1 {
				// This server is gone: the next one loads the sessions
				// from the fleet's record.
				b.url = (b.url + 1) % len(b.cfg.URLs)
				b.connID = ""
				fails = 0
			}
			if !b.wait(ctx, lines, delay) {
				return nil
			}
			delay = min(delay*2, backoffMax)
			continue
		}
		fails, delay = 0, backoffMin
		done, err := b.carry(ctx, ws, lines)
		if done {
			b.hangUp(ctx, ws)
			return err
		}
		b.cfg.Log.Warn("connection to the server dropped; reconnecting", "url", b.cfg.URLs[b.url], "err", err)
		b.awaySince = time.Now()
	}
}

// fatalError ends the bridge: the server refuses it for good.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return e.msg }

// wait sleeps d between attempts, taking the editor's messages meanwhile;
// false when the editor went.
func (b *bridge) wait(ctx context.Context, lines <-chan []byte, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return false
			}
			b.queue = append(b.queue, line)
			b.expire()
		case <-t.C:
			b.expire()
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// expire answers the queued requests with an error once the bridge has
// been away for the hold timeout: the editor gets an answer, not a hang.
func (b *bridge) expire() {
	if time.Since(b.awaySince) < b.cfg.HoldTimeout {
		return
	}
	b.failQueued("the ACP server cannot be reached (acp-sidecar connect keeps trying)")
}

func (b *bridge) failQueued(msg string) {
	for _, line := range b.queue {
		if env, err := proxy.Scan(line); err == nil && env.Kind == proxy.KindRequest {
			b.toEditor(proxy.ErrorResponse(env.ID, -32603, msg))
		}
	}
	b.queue = nil
}

// dial opens a WebSocket to the server in use, on connID when set.
func (b *bridge) dial(ctx context.Context) (*websocket.Conn, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+b.cfg.Token)
	if b.connID != "" {
		h.Set(HeaderConnection, b.connID)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, wsURL(b.cfg.URLs[b.url]), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized, http.StatusForbidden:
				return nil, &fatalError{msg: fmt.Sprintf("connect: %s refused the token (%s)", b.cfg.URLs[b.url], resp.Status)}
			case http.StatusNotFound, http.StatusGone:
				return nil, errUnknownConn
			}
		}
		return nil, err
	}
	ws.SetReadLimit(int64(b.cfg.MaxMessage))
	if id := resp.Header.Get(HeaderConnection); id != "" && b.connID == "" {
		b.connID = id
	}
	return ws, nil
}

var errUnknownConn = errors.New("the server no longer has the connection")

// connect opens the connection again where it can, or a fresh one.
func (b *bridge) connect(ctx context.Context) (*websocket.Conn, error) {
	if b.connID != "" {
		ws, err := b.dial(ctx)
		if err == nil {
			if err = b.resume(ctx, ws); err == nil {
				return ws, nil
			}
			ws.Close(websocket.StatusNormalClosure, "")
		}
		if !errors.Is(err, errUnknownConn) && !errors.Is(err, errNoResume) {
			return nil, err
		}
		b.cfg.Log.Info("the server cannot resume the connection; opening a fresh one and reattaching the sessions", "err", err)
		b.connID = ""
	}
	ws, err := b.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.fresh(ctx, ws); err != nil {
		ws.Close(websocket.StatusNormalClosure, "")
		b.connID = ""
		return nil, err
	}
	return ws, nil
}

var errNoResume = errors.New("the server refused to resume")

// resume asks for the stream after the bridge's cursor, and sends again
// what the server did not get.
func (b *bridge) resume(ctx context.Context, ws *websocket.Conn) error {
	id := b.ownID("resume")
	req := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%q,"params":{"cursor":%d}}`, id, ResumeMethod, b.cursor)
	if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
		return err
	}
	_, msg, err := ws.Read(ctx)
	if err != nil {
		return err
	}
	var r struct {
		Result *struct {
			Cursor   uint64 `json:"cursor"`
			Received uint64 `json:"received"`
		} `json:"result"`
	}
	if jsonErr := unmarshal(msg, &r); jsonErr != nil || r.Result == nil {
		return fmt.Errorf("%w: %s", errNoResume, msg)
	}
	// Send again what the server never took, then what waited.
	if r.Result.Received < b.ackBase {
		return fmt.Errorf("%w: the server took fewer messages than the bridge no longer keeps", errNoResume)
	}
	skip := r.Result.Received - b.ackBase
	if skip > uint64(len(b.unacked)) {
		skip = uint64(len(b.unacked))
	}
	again := b.unacked[skip:]
	b.unacked, b.ackBase, b.sent = nil, r.Result.Received, r.Result.Received
	for _, line := range again {
		if err := b.send(ctx, ws, line); err != nil {
			return err
		}
	}
	b.cfg.Log.Info("resumed the connection", "conn", b.connID, "cursor", b.cursor, "sent again", len(again))
	return b.flushQueue(ctx, ws)
}

// send writes one of the editor's messages, kept until a resume says the
// server has it.
func (b *bridge) send(ctx context.Context, ws *websocket.Conn, line []byte) error {
	b.unacked = append(b.unacked, line)
	if len(b.unacked) > maxUnacked {
		drop := len(b.unacked) - maxUnacked
		b.unacked = b.unacked[drop:]
		b.ackBase += uint64(drop)
	}
	b.sent++
	return ws.Write(ctx, websocket.MessageText, line)
}

// flushQueue sends what the editor wrote while the bridge was away.
func (b *bridge) flushQueue(ctx context.Context, ws *websocket.Conn) error {
	for len(b.queue) > 0 {
		line := b.queue[0]
		// Taken off first: once sent, even in vain, the line is among
		// the unacknowledged, which a resume sends again.
		b.queue = b.queue[1:]
		if err := b.fromEditor(ctx, ws, line); err != nil {
			return err
		}
	}
	return nil
}

// carry relays between the editor and ws until one ends. done says the
// editor went (err is then the bridge's result); otherwise err is why the
// socket ended, and the bridge reconnects.
func (b *bridge) carry(ctx context.Context, ws *websocket.Conn, lines <-chan []byte) (done bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	frames := make(chan []byte, 64)
	readErr := make(chan error, 1)
	go func() {
		defer close(frames)
		for {
			_, msg, err := ws.Read(ctx)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case frames <- msg:
			case <-ctx.Done():
				readErr <- ctx.Err()
				return
			}
		}
	}()
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		heartbeat(ctx, ws, b.cfg.Heartbeat, b.cfg.Log)
	}()
	defer func() {
		cancel()
		ws.CloseNow() // ends the reader if it is in a read
		for range frames {
		}
		<-beat
	}()
	for {
		editor := lines
		if b.reattaching > 0 {
			editor = nil
		}
		var retry <-chan time.Time
		if b.retryTimer != nil {
			retry = b.retryTimer.C
		}
		select {
		case <-retry:
			sids := b.retries
			b.retries, b.retryTimer = nil, nil
			for _, sid := range sids {
				if err := b.reattach(ctx, ws, sid); err != nil {
					return false, err
				}
			}
		case msg, ok := <-frames:
			if !ok {
				return false, <-readErr
			}
			b.cursor++
			b.fromServer(ctx, ws, msg)
			if b.reattaching == 0 && len(b.queue) > 0 {
				if err := b.flushQueue(ctx, ws); err != nil {
					return false, err
				}
			}
		case line, ok := <-editor:
			if !ok {
				return true, nil
			}
			if err := b.fromEditor(ctx, ws, line); err != nil {
				// The line is among the unacknowledged: a resume sends
				// it again if the server did not get it.
				return false, err
			}
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
}

// heartbeat pings ws every d until ctx ends, and drops ws when a pong
// does not come within d: the reader then fails, and the bridge resumes.
func heartbeat(ctx context.Context, ws *websocket.Conn, d time.Duration, log *slog.Logger) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, d)
		err := ws.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("the server did not answer a ping; dropping the connection to resume it", "err", err)
				ws.CloseNow()
			}
			return
		}
	}
}

// fromEditor notes what the bridge must know of an editor's message (the
// sessions it opens, its requests in flight), and sends it.
func (b *bridge) fromEditor(ctx context.Context, ws *websocket.Conn, line []byte) error {
	env, err := proxy.Scan(line)
	if err != nil {
		b.toEditor(proxy.ErrorResponse(nil, -32700, "Parse error: "+err.Error()))
		return nil
	}
	if env.Kind == proxy.KindRequest {
		if env.MethodIs("initialize") {
			b.toEditor(proxy.ErrorResponse(env.ID, -32600, "initialize was already sent on this connection"))
			return nil
		}
		b.inflight[string(env.ID)] = true
		b.noteOpening(env, line)
	}
	return b.send(ctx, ws, line)
}

// fromServer hands the editor a server message, unless it is the bridge's
// own business: an answer to its own request, or a replay of history the
// editor already has.
func (b *bridge) fromServer(ctx context.Context, ws *websocket.Conn, msg []byte) {
	env, err := proxy.Scan(msg)
	if err != nil {
		b.toEditor(msg)
		return
	}
	if env.Kind == proxy.KindResponse {
		if call, ok := b.own[string(env.ID)]; ok {
			delete(b.own, string(env.ID))
			call.answered(b, msg, env)
			return
		}
		delete(b.inflight, string(env.ID))
		b.noteOpened(env, msg)
	}
	if env.SessionID.Present() && env.Kind == proxy.KindNotification && b.hushed[sessionOf(msg, env)] {
		return
	}
	b.toEditor(msg)
}

func (b *bridge) toEditor(msg []byte) {
	b.out.Write(msg)
	b.out.WriteByte('\n')
	if err := b.out.Flush(); err != nil {
		b.cfg.Log.Warn("write to the editor", "err", err)
	}
}

// hangUp ends the connection on the server when the editor went: its
// agent has no one to wait for.
func (b *bridge) hangUp(ctx context.Context, ws *websocket.Conn) {
	if b.connID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, httpURL(b.cfg.URLs[b.url]), nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+b.cfg.Token)
	req.Header.Set(HeaderConnection, b.connID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.cfg.Log.Warn("could not end the connection on the server; it ends after its detach ttl", "err", err)
		return
	}
	resp.Body.Close()
}

// ownID makes the raw id of one of the bridge's own requests.
func (b *bridge) ownID(what string) string {
	b.seq++
	return fmt.Sprintf("%q", fmt.Sprintf("%s%s-%d", ownPrefix, what, b.seq))
}

func idOrNil(env proxy.Envelope) []byte {
	if env.Kind == proxy.KindRequest {
		return env.ID
	}
	return nil
}

// wsURL is u with a WebSocket scheme.
func wsURL(u string) string {
	switch {
	case strings.HasPrefix(u, "https://"):
		return "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "http://"):
		return "ws://" + strings.TrimPrefix(u, "http://")
	}
	return u
}

// httpURL is u with an HTTP scheme.
func httpURL(u string) string {
	switch {
	case strings.HasPrefix(u, "wss://"):
		return "https://" + strings.TrimPrefix(u, "wss://")
	case strings.HasPrefix(u, "ws://"):
		return "http://" + strings.TrimPrefix(u, "ws://")
	}
	return u
}
