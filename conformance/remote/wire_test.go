//go:build linux

package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// wire is a bare HTTP client of serve, for what the SDK's client never
// does: resuming an SSE stream by Last-Event-ID, and sending what a
// server must refuse.
type wire struct {
	t     *testing.T
	url   string
	token string
	conn  string
}

func (w *wire) do(ctx context.Context, method, body string, h map[string]string) *http.Response {
	w.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.url, r)
	if err != nil {
		w.t.Fatal(err)
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if w.conn != "" {
		req.Header.Set("Acp-Connection-Id", w.conn)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	return resp
}

func (w *wire) status(ctx context.Context, method, body string, h map[string]string) (int, string) {
	resp := w.do(ctx, method, body, h)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // the status is the point; the body only explains it
	return resp.StatusCode, string(b)
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// sseEvent is one event of an SSE stream: its id (the cursor) and data.
type sseEvent struct {
	id   uint64
	data string
}

// readEvents reads events from an SSE body until pred holds.
func readEvents(t *testing.T, body io.Reader, pred func([]sseEvent) bool) []sseEvent {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	var evs []sseEvent
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				t.Fatalf("an event id that is not a cursor: %q", line)
			}
			cur.id = n
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case line == "" && cur.data != "":
			evs = append(evs, cur)
			cur = sseEvent{}
			if pred(evs) {
				return evs
			}
		}
	}
	t.Fatalf("the stream ended after %d events: %v", len(evs), sc.Err())
	return nil
}

// An SSE stream resumes after the cursor in Last-Event-ID with exactly the
// messages after it; a cursor older than what the server keeps gets 409,
// never a silent gap.
func TestSSEResumesFromLastEventID(t *testing.T) {
	t.Parallel()
	srv := startServe(t, []string{"--retain", "50"})
	ctx := ctxFor(t)
	w := &wire{t: t, url: srv.URL, token: srv.Token}
	resp := w.do(ctx, "POST", initLine, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %s", resp.Status)
	}
	w.conn = resp.Header.Get("Acp-Connection-Id")
	resp.Body.Close()
	if w.conn == "" {
		t.Fatal("initialize's answer has no Acp-Connection-Id")
	}
	// The connection's stream, for session/new's answer.
	sse := w.do(ctx, "GET", "", map[string]string{"Accept": "text/event-stream"})
	if code, body := w.status(ctx, "POST", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, nil); code != 202 {
		t.Fatalf("session/new: %d %s", code, body)
	}
	evs := readEvents(t, sse.Body, func(e []sseEvent) bool { return strings.Contains(e[len(e)-1].data, `"id":2`) })
	sse.Body.Close()
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &sess); err != nil || sess.Result.SessionID == "" {
		t.Fatalf("session/new's answer: %q %v", evs[len(evs)-1].data, err)
	}
	sid := sess.Result.SessionID
	sh := map[string]string{"Accept": "text/event-stream", "Acp-Session-Id": sid}
	// A turn of 30 chunks on the session's stream; the stream is cut after
	// the tenth event, then resumed from it.
	s1 := w.do(ctx, "GET", "", sh)
	prompt := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream 30 8"}]}}`, sid)
	if code, body := w.status(ctx, "POST", prompt, map[string]string{"Acp-Session-Id": sid}); code != 202 {
		t.Fatalf("prompt: %d %s", code, body)
	}
	first := readEvents(t, s1.Body, func(e []sseEvent) bool { return len(e) == 10 })
	s1.Body.Close()
	last := first[len(first)-1].id
	s2 := w.do(ctx, "GET", "", map[string]string{"Accept": "text/event-stream", "Acp-Session-Id": sid, "Last-Event-ID": strconv.FormatUint(last, 10)})
	if s2.StatusCode != 200 {
		t.Fatalf("resume from %d: %s", last, s2.Status)
	}
	rest := readEvents(t, s2.Body, func(e []sseEvent) bool { return strings.Contains(e[len(e)-1].data, `"id":3`) })
	s2.Body.Close()
	all := append(first, rest...)
	chunks := 0
	for i, e := range all {
		if i > 0 && e.id <= all[i-1].id {
			t.Errorf("cursor %d after %d: not increasing", e.id, all[i-1].id)
		}
		if strings.Contains(e.data, "agent_message_chunk") {
			chunks++
		}
	}
	if chunks != 32 {
		t.Errorf("the turn's chunks across the cut: %d, want 32 (2 reply chunks and 30 more)", chunks)
	}
	// Another turn pushes the first one's messages out of what is kept
	// (--retain 50): resuming from before them is refused.
	prompt = fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream 60 8"}]}}`, sid)
	// From the cursor it had: the server may not yet have seen s2 end, and
	// a stream with a reader takes a new one only when it resumes.
	s3 := w.do(ctx, "GET", "", map[string]string{"Accept": "text/event-stream", "Acp-Session-Id": sid, "Last-Event-ID": strconv.FormatUint(all[len(all)-1].id, 10)})
	if s3.StatusCode != 200 {
		t.Fatalf("the stream for the second turn: %s", s3.Status)
	}
	if code, body := w.status(ctx, "POST", prompt, map[string]string{"Acp-Session-Id": sid}); code != 202 {
		t.Fatalf("prompt: %d %s", code, body)
	}
	readEvents(t, s3.Body, func(e []sseEvent) bool { return strings.Contains(e[len(e)-1].data, `"id":4`) })
	s3.Body.Close()
	if code, body := w.status(ctx, "GET", "", map[string]string{"Accept": "text/event-stream", "Acp-Session-Id": sid, "Last-Event-ID": strconv.FormatUint(first[0].id, 10)}); code != http.StatusConflict {
		t.Errorf("a resume from a cursor no longer kept: %d %s, want 409", code, body)
	}
	if code, _ := w.status(ctx, "DELETE", "", nil); code != 202 {
		t.Errorf("DELETE: %d", code)
	}
	if code, _ := w.status(ctx, "POST", `{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}`, nil); code != http.StatusGone {
		t.Errorf("a POST on a deleted connection: %d, want 410", code)
	}
}

// What a listener on a network must refuse, it refuses with a clear
// status, and the server stays up for the next client.
func TestServeRefuses(t *testing.T) {
	t.Parallel()
	srv := startServe(t, []string{"--max-message", "4096", "--max-connections", "4"})
	ctx := ctxFor(t)
	bare := &wire{t: t, url: srv.URL}
	if code, _ := bare.status(ctx, "POST", initLine, nil); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	wrong := &wire{t: t, url: srv.URL, token: "not-the-token"}
	if code, _ := wrong.status(ctx, "POST", initLine, nil); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", code)
	}
	w := &wire{t: t, url: srv.URL, token: srv.Token}
	if code, _ := w.status(ctx, "POST", initLine, map[string]string{"Origin": "https://evil.example"}); code != http.StatusForbidden {
		t.Errorf("a foreign Origin: %d, want 403", code)
	}
	if code, body := w.status(ctx, "POST", `[`+initLine+`]`, nil); code != http.StatusBadRequest || !strings.Contains(body, "-32600") || !strings.Contains(body, `"id":null`) {
		t.Errorf("a batch: %d %s, want 400 with -32600 and id null", code, body)
	}
	if code, _ := w.status(ctx, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"`+strings.Repeat("a", 5000)+`"}}`, nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a message over --max-message: %d, want 413", code)
	}
	if code, _ := w.status(ctx, "POST", `{"jsonrpc":`, nil); code != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d, want 400", code)
	}
	if code, _ := w.status(ctx, "POST", `{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`, map[string]string{"Acp-Connection-Id": "nobody"}); code != http.StatusNotFound {
		t.Errorf("an unknown connection: %d, want 404", code)
	}
	// Connections that open and never send end at the header timeout, and
	// do not keep the server from the next client.
	host := hostOf(t, srv.URL)
	var idle []net.Conn
	for range 200 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatalf("idle connection: %v", err)
		}
		idle = append(idle, c)
	}
	// One that sends its headers a byte at a time.
	slow, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Write([]byte("P")); err != nil {
		t.Fatal(err)
	}
	c := sdkClient(t, "http", srv.URL, srv.Token, acpclient.Options{})
	if _, err := c.Initialize(ctx); err != nil {
		t.Errorf("a client beside idle and slow ones: %v", err)
	}
	// The slow one is cut at the header timeout (10s), not kept forever.
	_ = slow.SetReadDeadline(time.Now().Add(bound))
	if _, err := io.ReadAll(slow); err != nil {
		t.Errorf("the slow client's connection was not ended by the server: %v", err)
	}
	for _, c := range append(idle, slow) {
		c.Close()
	}
	// More connections than --max-connections: 503, with the reason.
	for i := 0; ; i++ {
		resp := w.do(ctx, "POST", initLine, nil)
		b, _ := io.ReadAll(resp.Body) // the status and reason are checked
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			if !bytes.Contains(b, []byte("max-connections")) {
				t.Errorf("the refusal does not say why: %s", b)
			}
			break
		}
		if resp.StatusCode != 200 || i > 4 {
			t.Fatalf("connection %d: %d %s", i, resp.StatusCode, b)
		}
	}
}

// Without TLS the server listens on loopback only.
func TestServeWithoutTLSListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(sidecar.Path(t), "serve", "--listen", "0.0.0.0:0", "--state-dir", t.TempDir(), "--", "true")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "loopback") {
		t.Errorf("serve on 0.0.0.0 without TLS: %v\n%s", err, out)
	}
}

// serve --ui serves the record's pages on the same listener, under the
// same token, beside ACP: a remote box has one port to forward.
func TestServeUI(t *testing.T) {
	t.Parallel()
	srv := startServe(t, []string{"--ui"})
	ctx := ctxFor(t)
	c := sdkClient(t, "ws", srv.URL, srv.Token, acpclient.Options{})
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewSession(ctx, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	m, err := srv.Stderr.Wait(ctx, regexp.MustCompile(`the record's pages: (\S+)`))
	if err != nil {
		t.Fatal(err)
	}
	// A browser: the token moves into a cookie, and the page follows.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body) // the status and the page's words are checked
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<html") {
		t.Errorf("the pages with the token: %s %.200s", resp.Status, page)
	}
	resp, err = http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the pages without the token: %s, want 403", resp.Status)
	}
}

// A connection opens at most --max-sessions sessions: the next session/new
// is refused with 429 and the reason, and the connection goes on.
func TestServeMaxSessions(t *testing.T) {
	t.Parallel()
	srv := startServe(t, []string{"--max-sessions", "1"})
	ctx := ctxFor(t)
	w := &wire{t: t, url: srv.URL, token: srv.Token}
	resp := w.do(ctx, "POST", initLine, nil)
	w.conn = resp.Header.Get("Acp-Connection-Id")
	resp.Body.Close()
	sse := w.do(ctx, "GET", "", map[string]string{"Accept": "text/event-stream"})
	defer sse.Body.Close()
	newSession := func(id int) (int, string) {
		return w.status(ctx, "POST", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, id), nil)
	}
	if code, body := newSession(2); code != 202 {
		t.Fatalf("the first session/new: %d %s", code, body)
	}
	readEvents(t, sse.Body, func(e []sseEvent) bool { return strings.Contains(e[len(e)-1].data, `"id":2`) })
	if code, body := newSession(3); code != http.StatusTooManyRequests || !strings.Contains(body, "max-sessions") {
		t.Errorf("a session/new past --max-sessions: %d %s, want 429 naming the flag", code, body)
	}
	if code, body := w.status(ctx, "POST", `{"jsonrpc":"2.0","id":4,"method":"session/list","params":{}}`, nil); code != 202 {
		t.Errorf("the connection after the refusal: %d %s", code, body)
	}
}
