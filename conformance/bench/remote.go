package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// The remote workload (-only remote, only when named: it needs node and
// the ACP SDK, scripts/e2e-setup.sh sdk) measures `acp-sidecar serve`
// over WebSocket and over HTTP/SSE, each against the sidecar on stdio
// (round trips) and against the ACP SDK's own server, AcpServer, serving
// the same agent (throughput), in one run, plus the time from a
// WebSocket's reconnect to its first replayed message.

//go:embed sdkserver.mjs
var sdkServerJS []byte

const (
	remoteToken = "bench-token"
	// remoteChunk is the size of each streamed chunk's text: a small frame.
	remoteChunk = 160
)

// A remoteConn is one client connection of a target.
type remoteConn interface {
	// send writes one message; session is its session, for the HTTP
	// transport's header.
	send(ctx context.Context, msg []byte, session string) error
	// recv is the next server message.
	recv(ctx context.Context) ([]byte, error)
	// opened tells the connection a session is open, for a transport with
	// a stream per session.
	opened(ctx context.Context, session string) error
	close()
}

// remoteResult is, per target, the medians over rounds.
type remoteResult struct {
	rtP50, rtP99 map[string]time.Duration
	tput         map[string]float64 // frames/s
	reconnect    time.Duration
}

// Targets, by name.
const (
	tStdio     = "stdio"
	tServeWS   = "serve-ws"
	tServeHTTP = "serve-http"
	tSDKWS     = "sdk-ws"
	tSDKHTTP   = "sdk-http"
)

var remoteTargets = []string{tStdio, tServeWS, tServeHTTP, tSDKWS, tSDKHTTP}

// remoteWorkload starts serve and the SDK's server, then measures every
// target o.rounds times.
func (r *runner) remoteWorkload(ctx context.Context, o options, progress io.Writer) (*remoteResult, error) {
	sdkDir := o.sdk
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err != nil {
		return nil, fmt.Errorf("-only remote needs the ACP SDK's server (-sdk DIR; scripts/e2e-setup.sh sdk installs it): %w", err)
	}
	// The agent is the bench's own (bench turns): it streams a turn's
	// chunks as fast as a pipe takes them, so the transports are what is
	// measured, not the agent.
	chunks := max(o.small/20, 100)
	agent := []string{r.exe, "bench", "turns", "-n", strconv.Itoa(chunks), "-size", strconv.Itoa(o.smallSize)}
	tokenFile := filepath.Join(r.dir, "token")
	if err := os.WriteFile(tokenFile, []byte(remoteToken), 0o600); err != nil {
		return nil, err
	}
	serveURL, stopServe, err := startListener(ctx, filepath.Join(r.dir, "serve.err"), `serving ACP on (\S+)`, nil,
		append([]string{r.exe, "serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--state-dir", filepath.Join(r.dir, "serve-state")}, append(append(r.extra, "--"), agent...)...)...)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	defer stopServe()
	script := filepath.Join(r.dir, "sdkserver.mjs")
	if err := os.WriteFile(script, sdkServerJS, 0o600); err != nil {
		return nil, err
	}
	sdkURL, stopSDK, err := startListener(ctx, filepath.Join(r.dir, "sdk.err"), `listening (\d+)`, []string{"ACP_SDK_DIR=" + sdkDir},
		append([]string{"node", script}, agent...)...)
	if err != nil {
		return nil, fmt.Errorf("the SDK's server: %w", err)
	}
	defer stopSDK()
	sdkURL = "http://127.0.0.1:" + sdkURL

	open := map[string]func(context.Context) (remoteConn, error){
		tStdio: func(ctx context.Context) (remoteConn, error) {
			return startStdioConn(ctx, append([]string{r.exe, "--state-dir", filepath.Join(r.dir, "stdio-state")}, append(append(r.extra, "--"), agent...)...))
		},
		tServeWS: func(ctx context.Context) (remoteConn, error) { return dialWS(ctx, serveURL, remoteToken, "") },
		tServeHTTP: func(ctx context.Context) (remoteConn, error) {
			return &httpConn{url: serveURL, token: remoteToken}, nil
		},
		tSDKWS:   func(ctx context.Context) (remoteConn, error) { return dialWS(ctx, sdkURL, "", "") },
		tSDKHTTP: func(ctx context.Context) (remoteConn, error) { return &httpConn{url: sdkURL}, nil },
	}
	rts := map[string][][2]time.Duration{}
	tputs := map[string][]float64{}
	var reconnects []float64
	for round := range o.rounds {
		order := remoteTargets
		if round%2 == 1 {
			order = append([]string{}, remoteTargets...)
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, name := range order {
			rt, tput, err := r.remoteRun(ctx, open[name], o.roundTrips, chunks)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round+1, name, err)
			}
			rts[name] = append(rts[name], rt)
			tputs[name] = append(tputs[name], tput)
		}
		d, err := reconnectTime(ctx, serveURL)
		if err != nil {
			return nil, fmt.Errorf("round %d, reconnect: %w", round+1, err)
		}
		reconnects = append(reconnects, float64(d))
		fmt.Fprintf(progress, "bench: remote round %d/%d: round trip p50 stdio %v, serve-ws %v, serve-http %v; frames/s serve-ws %.0f, sdk-ws %.0f, serve-http %.0f, sdk-http %.0f\n",
			round+1, o.rounds, rts[tStdio][round][0], rts[tServeWS][round][0], rts[tServeHTTP][round][0],
			tputs[tServeWS][round], tputs[tSDKWS][round], tputs[tServeHTTP][round], tputs[tSDKHTTP][round])
	}
	res := &remoteResult{rtP50: map[string]time.Duration{}, rtP99: map[string]time.Duration{}, tput: map[string]float64{}, reconnect: time.Duration(median(reconnects))}
	for _, name := range remoteTargets {
		var p50, p99 []float64
		for _, v := range rts[name] {
			p50, p99 = append(p50, float64(v[0])), append(p99, float64(v[1]))
		}
		res.rtP50[name], res.rtP99[name] = time.Duration(median(p50)), time.Duration(median(p99))
		res.tput[name] = median(tputs[name])
	}
	return res, nil
}

// remoteRun opens a connection, initializes it, opens a session, and
// measures n round trips (a request the agent answers at once) and the
// throughput of a turn that streams chunks small frames.
func (r *runner) remoteRun(ctx context.Context, open func(context.Context) (remoteConn, error), n, chunks int) (rt [2]time.Duration, tput float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	c, err := open(ctx)
	if err != nil {
		return rt, 0, err
	}
	defer c.close()
	sid, err := remoteSession(ctx, c)
	if err != nil {
		return rt, 0, err
	}
	warm := min(n/10, 200)
	times := make([]time.Duration, 0, n)
	for i := 1; i <= warm+n; i++ {
		id := 100 + i
		start := time.Now()
		if err := c.send(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"_bench/ping","params":{"sessionId":%q}}`, id, sid), sid); err != nil {
			return rt, 0, err
		}
		if _, err := awaitID(ctx, c, id, nil); err != nil {
			return rt, 0, err
		}
		if i > warm {
			times = append(times, time.Since(start))
		}
	}
	rt = [2]time.Duration{quantile(times, 0.5), quantile(times, 0.99)}
	got := 0
	start := time.Now()
	prompt := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":99,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream %d %d"}]}}`, sid, chunks, remoteChunk)
	if err := c.send(ctx, prompt, sid); err != nil {
		return rt, 0, err
	}
	if _, err := awaitID(ctx, c, 99, func(msg []byte) {
		if bytes.Contains(msg, []byte(`"agent_message_chunk"`)) {
			got++
		}
	}); err != nil {
		return rt, 0, err
	}
	if got < chunks {
		return rt, 0, fmt.Errorf("the turn streamed %d chunks, want %d", got, chunks)
	}
	return rt, perSecond(float64(got), time.Since(start)), nil
}

// remoteSession initializes c and opens a session on it.
func remoteSession(ctx context.Context, c remoteConn) (string, error) {
	if err := c.send(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`), ""); err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	if _, err := awaitID(ctx, c, 1, nil); err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	if err := c.opened(ctx, ""); err != nil {
		return "", err
	}
	if err := c.send(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`), ""); err != nil {
		return "", fmt.Errorf("session/new: %w", err)
	}
	msg, err := awaitID(ctx, c, 2, nil)
	if err != nil {
		return "", fmt.Errorf("session/new: %w", err)
	}
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &res); err != nil || res.Result.SessionID == "" {
		return "", fmt.Errorf("session/new answered %.200q", msg)
	}
	return res.Result.SessionID, c.opened(ctx, res.Result.SessionID)
}

// awaitID reads messages until the answer with id, handing each other one
// to each (when set).
func awaitID(ctx context.Context, c remoteConn, id int, each func([]byte)) ([]byte, error) {
	prefix := fmt.Appendf(nil, `"id":%d,`, id)
	for {
		msg, err := c.recv(ctx)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(msg, prefix) && isResponse(msg) {
			return msg, nil
		}
		if each != nil {
			each(msg)
		}
	}
}

// isResponse says whether msg is a response: it has no method member.
func isResponse(msg []byte) bool {
	var m struct {
		Method *string `json:"method"`
	}
	return json.Unmarshal(msg, &m) == nil && m.Method == nil
}

// reconnectTime measures a WebSocket that drops with an answer in flight:
// from the new socket's dial to the first message replayed on it.
func reconnectTime(ctx context.Context, url string) (time.Duration, error) {
	c, err := dialWS(ctx, url, remoteToken, "")
	if err != nil {
		return 0, err
	}
	sid, err := remoteSession(ctx, c)
	if err != nil {
		c.close()
		return 0, err
	}
	if err := c.send(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":7,"method":"_bench/ping","params":{"sessionId":%q}}`, sid), sid); err != nil {
		c.close()
		return 0, err
	}
	cursor, conn := c.count-1, c.connID // the initialize answer has no cursor
	c.close()
	start := time.Now()
	d, err := dialWS(ctx, url, remoteToken, conn)
	if err != nil {
		return 0, err
	}
	defer func() {
		d.close()
		deleteConn(ctx, url, conn)
	}()
	if err := d.ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"resume","method":"stream/resume","params":{"cursor":%d}}`, cursor)); err != nil {
		return 0, err
	}
	if _, err := d.recv(ctx); err != nil { // the resume's answer
		return 0, err
	}
	if _, err := d.recv(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// deleteConn ends a connection on the server.
func deleteConn(ctx context.Context, url, conn string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+remoteToken)
	req.Header.Set("Acp-Connection-Id", conn)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// startListener starts argv, waits for the line on its stderr (or stdout)
// that re matches, and returns its first group and a stop func.
func startListener(ctx context.Context, errFile, re string, env []string, argv ...string) (string, func(), error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return "", nil, err
	}
	pw.Close()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt) // it may be gone; Wait says
		_ = cmd.Wait()
		pr.Close()
	}
	found := make(chan string, 1)
	var seen acpclient.Buffer
	go func() {
		defer close(found)
		sc := bufio.NewScanner(pr)
		rx := regexp.MustCompile(re)
		sent := false
		for sc.Scan() {
			seen.Write(append(sc.Bytes(), '\n'))
			if m := rx.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		_ = os.WriteFile(errFile, seen.Bytes(), 0o600) // kept with -keep, for a failure's cause
	}()
	select {
	case v, ok := <-found:
		if !ok {
			stop()
			return "", nil, fmt.Errorf("%s ended: %s", argv[0], seen.String())
		}
		return v, stop, nil
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	case <-time.After(time.Minute):
		stop()
		return "", nil, fmt.Errorf("%s did not say where it listens: %s", argv[0], seen.String())
	}
}

// stdioConn is the sidecar on stdio.
type stdioConn struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startStdioConn(ctx context.Context, argv []string) (*stdioConn, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &stdioConn{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}, nil
}

func (c *stdioConn) send(_ context.Context, msg []byte, _ string) error {
	_, err := c.in.Write(append(msg, '\n'))
	return err
}

func (c *stdioConn) recv(context.Context) ([]byte, error) {
	return c.out.ReadBytes('\n')
}

func (c *stdioConn) opened(context.Context, string) error { return nil }

func (c *stdioConn) close() {
	c.in.Close()
	_ = c.cmd.Wait() // the sidecar's exit status is not what is measured
}

// wsConn is a WebSocket client.
type wsConn struct {
	ws     *websocket.Conn
	connID string
	count  int // messages received
}

func dialWS(ctx context.Context, url, token, conn string) (*wsConn, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	if conn != "" {
		h.Set("Acp-Connection-Id", conn)
	}
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	return &wsConn{ws: ws, connID: resp.Header.Get("Acp-Connection-Id")}, nil
}

func (c *wsConn) send(ctx context.Context, msg []byte, _ string) error {
	return c.ws.Write(ctx, websocket.MessageText, msg)
}

func (c *wsConn) recv(ctx context.Context) ([]byte, error) {
	_, msg, err := c.ws.Read(ctx)
	c.count++
	return msg, err
}

func (c *wsConn) opened(context.Context, string) error { return nil }

func (c *wsConn) close() { c.ws.CloseNow() }

// httpConn is a Streamable HTTP client: POSTs, and SSE streams read into
// one channel.
type httpConn struct {
	url, token, connID string
	msgs               chan []byte
	errs               chan error
	done               chan struct{} // closed by close: the stream readers exit
	cancel             context.CancelFunc
	bodies             []io.Closer
}

func (c *httpConn) request(ctx context.Context, method string, body []byte, session string, h map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.connID != "" {
		req.Header.Set("Acp-Connection-Id", c.connID)
	}
	if session != "" {
		req.Header.Set("Acp-Session-Id", session)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return http.DefaultClient.Do(req)
}

func (c *httpConn) send(ctx context.Context, msg []byte, session string) error {
	resp, err := c.request(ctx, http.MethodPost, msg, session, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // the answer of initialize; a refusal's reason
	if c.connID == "" {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("initialize: %s %s", resp.Status, b)
		}
		c.connID = resp.Header.Get("Acp-Connection-Id")
		c.msgs, c.errs, c.done = make(chan []byte, 4096), make(chan error, 4), make(chan struct{})
		c.msgs <- b
		return nil
	}
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST: %s %s", resp.Status, b)
	}
	return nil
}

// opened opens the connection's stream ("") or a session's.
func (c *httpConn) opened(ctx context.Context, session string) error {
	if c.cancel == nil {
		var sctx context.Context
		sctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
		ctx = sctx
	}
	resp, err := c.request(ctx, http.MethodGet, nil, session, map[string]string{"Accept": "text/event-stream"})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fmt.Errorf("GET stream %q: %s", session, resp.Status)
	}
	c.bodies = append(c.bodies, resp.Body)
	// The reader exits when its stream ends: close closes every body.
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				select {
				case c.msgs <- bytes.Clone(data):
				case <-c.done:
					return
				}
			}
		}
		select {
		case c.errs <- errors.Join(errors.New("an SSE stream ended"), sc.Err()):
		case <-c.done:
		}
	}()
	return nil
}

func (c *httpConn) recv(ctx context.Context) ([]byte, error) {
	select {
	case m := <-c.msgs:
		return m, nil
	case err := <-c.errs:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *httpConn) close() {
	if c.done != nil {
		close(c.done)
	}
	if c.connID != "" {
		if resp, err := c.request(context.Background(), http.MethodDelete, nil, "", nil); err == nil {
			resp.Body.Close()
		}
	}
	for _, b := range c.bodies {
		b.Close()
	}
	if c.cancel != nil {
		c.cancel()
	}
}

// Targets of the remote workload: serve's throughput at least this many
// times the SDK server's, its round trip at most this many times stdio's.
const (
	targetRemoteTput = 3.0
	targetRemoteRT   = 1.5
)

func remoteMetrics(r *remoteResult) []Metric {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pair := func(name, unit string, sidecar, base float64) Metric {
		m := Metric{Name: name, Unit: unit, Sidecar: sidecar, ByteCopy: base, Added: sidecar - base}
		if base != 0 {
			m.Ratio = sidecar / base
		}
		return m
	}
	var out []Metric
	for _, t := range []struct{ name, serve, sdk string }{{"ws", tServeWS, tSDKWS}, {"http", tServeHTTP, tSDKHTTP}} {
		p50 := pair("remote_"+t.name+"_round_trip_p50", "ms", ms(r.rtP50[t.serve]), ms(r.rtP50[tStdio]))
		p50.Target = fmt.Sprintf("<= %.1fx stdio", targetRemoteRT)
		p50.Pass = verdict(p50.Ratio <= targetRemoteRT)
		p99 := pair("remote_"+t.name+"_round_trip_p99", "ms", ms(r.rtP99[t.serve]), ms(r.rtP99[tStdio]))
		tput := pair("remote_"+t.name+"_small_throughput", "frames/s", r.tput[t.serve], r.tput[t.sdk])
		tput.Target = fmt.Sprintf(">= %.0fx the SDK server", targetRemoteTput)
		tput.Pass = verdict(tput.Ratio >= targetRemoteTput)
		out = append(out, p50, p99, tput)
	}
	out = append(out,
		pair("remote_sdk_round_trip_p50", "ms", ms(r.rtP50[tSDKWS]), ms(r.rtP50[tStdio])),
		pair("remote_stdio_small_throughput", "frames/s", r.tput[tStdio], r.tput[tSDKWS]),
		Metric{Name: "remote_reconnect_first_frame", Unit: "ms", Sidecar: ms(r.reconnect)},
	)
	return out
}
