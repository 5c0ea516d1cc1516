package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness runs a Relay over in-memory pipes. The test plays both peers: it
// writes the client's and the agent's frames and reads what each receives.
type harness struct {
	relay       *Relay
	clientW     *io.PipeWriter // the client's frames
	agentW      *io.PipeWriter // the agent's frames
	toClient    *bufio.Reader  // what the client receives
	toAgent     *bufio.Reader  // what the agent receives
	done        chan error
	toAgentR    *io.PipeReader
	toClientR   *io.PipeReader
	clientEOF   chan struct{}
	closeClient sync.Once
}

// newHarness runs a relay strict about one answer per request
// (Config.Strict), as every test's relay is but those of that rule's own.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	cfg.Strict = true
	return newLenientHarness(t, cfg)
}

// newLenientHarness runs a relay that logs a hook's broken answer promise,
// for the tests of what the relay then does.
func newLenientHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	cIn, cW := io.Pipe()
	aOutR, aW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	toAgentR, toAgentW := io.Pipe()
	h := &harness{clientW: cW, agentW: aW, toClientR: toClientR, toAgentR: toAgentR,
		toClient: bufio.NewReaderSize(toClientR, 1<<20), toAgent: bufio.NewReaderSize(toAgentR, 1<<20),
		done: make(chan error, 1), clientEOF: make(chan struct{})}
	cfg.ClientIn, cfg.ClientOut, cfg.AgentIn, cfg.AgentOut = cIn, toClientW, toAgentW, aOutR
	cfg.OnClientEOF = func() { close(h.clientEOF) }
	h.relay = NewRelay(cfg)
	go func() { h.done <- h.relay.Run(context.Background()) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop ends both peers and waits for the relay; it runs once.
func (h *harness) stop(t *testing.T) {
	h.closeClient.Do(func() { h.stopOnce(t) })
}

func (h *harness) stopOnce(t *testing.T) {
	h.clientW.Close()
	go io.Copy(io.Discard, h.toAgentR)
	go io.Copy(io.Discard, h.toClientR)
	h.agentW.Close()
	if err := <-h.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	h.toAgentR.Close()
	h.toClientR.Close()
}

func send(t *testing.T, w io.Writer, line string) {
	t.Helper()
	if _, err := io.WriteString(w, line+"\n"); err != nil {
		t.Fatalf("write %.60q: %v", line, err)
	}
}

// sendAsync writes from a goroutine of its own; a failed write shows up as
// the reader's missing frame.
func sendAsync(w io.Writer, line string) { io.WriteString(w, line+"\n") }

func recv(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

func TestRelayPassesValidFramesByteForByte(t *testing.T) {
	h := newHarness(t, Config{})
	frames := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"id":-6,"method":"x","jsonrpc":"2.0"}`,
		`{ "jsonrpc" : "2.0", "id" : "str", "method" : "_vendor/thing", "params" : { "z":1, "a":2 } }`,
		`{"jsonrpc":"2.0","id":null,"method":"m"}`,
		`{"jsonrpc":"2.0","method":"_x","params":{"_meta":{"n":12345678901234567890,"h":"<>&\u00e9"}}}` + "\r",
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`,
	}
	for _, f := range frames {
		send(t, h.clientW, f)
		if got := recv(t, h.toAgent); got != f {
			t.Errorf("agent got %q, want %q", got, f)
		}
		send(t, h.agentW, f)
		if got := recv(t, h.toClient); got != f {
			t.Errorf("client got %q, want %q", got, f)
		}
	}
}

func TestRelaySkipsBlankLines(t *testing.T) {
	h := newHarness(t, Config{})
	send(t, h.clientW, "")
	send(t, h.clientW, "  \r")
	send(t, h.clientW, `{"id":1,"method":"m"}`)
	if got := recv(t, h.toAgent); got != `{"id":1,"method":"m"}` {
		t.Errorf("agent got %q", got)
	}
}

func TestMalformedFramesNeverCross(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct {
		bad, id string // id: the id the answer must carry, "null" if none is readable
	}{
		{"not json", "null"},
		{"{\"a\":\"\xff\"}", "null"},
		// A request whose id can be read gets its answer under that id.
		{`{"id":1,"method":`, "1"},
		{"{\"jsonrpc\":\"2.0\",\"id\":\"s-7\",\"method\":\"session/prompt\",\"params\":{\"text\":\"caf\xe9\"}}", `"s-7"`},
		{`{"jsonrpc":"2.0","method":"session/prompt","params":` + strings.Repeat("[", 200) + `,"id":8}`, "8"},
	} {
		send(t, h.clientW, tc.bad)
		got := recv(t, h.toClient)
		var resp struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &resp); err != nil || resp.Error.Code != -32700 || string(resp.ID) != tc.id {
			t.Errorf("client got %q for %q; want a -32700 error with id %s", got, tc.bad, tc.id)
		}
		send(t, h.agentW, tc.bad)
		if tc.id != "null" {
			// The agent's own malformed request is answered to the agent.
			if got := recv(t, h.toAgent); !strings.Contains(got, `"id":`+tc.id+`,"error":{"code":-32700`) {
				t.Errorf("agent got %q for its %q; want a -32700 error with id %s", got, tc.bad, tc.id)
			}
		}
	}
	// Both directions still work, and neither peer saw the bad lines.
	send(t, h.clientW, `{"id":1,"method":"ok"}`)
	if got := recv(t, h.toAgent); got != `{"id":1,"method":"ok"}` {
		t.Errorf("agent got %q, want the first valid frame", got)
	}
	send(t, h.agentW, `{"id":1,"result":{}}`)
	if got := recv(t, h.toClient); got != `{"id":1,"result":{}}` {
		t.Errorf("client got %q, want the first valid frame", got)
	}
}

// A JSON array is a JSON-RPC batch, which ACP does not have: neither side
// ever gets one, its sender gets one -32600 with id null, and the relay
// goes on.
func TestBatchesNeverCross(t *testing.T) {
	h := newHarness(t, Config{})
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"` + BatchMessage + `"}}`
	for _, batch := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}]`,
		` [ {"jsonrpc":"2.0","method":"session/cancel"}, {"jsonrpc":"2.0","id":2,"result":{}} ]`,
		`[]`,
	} {
		send(t, h.clientW, batch)
		if got := recv(t, h.toClient); got != want {
			t.Errorf("client got %q for its batch %q; want %q", got, batch, want)
		}
		send(t, h.agentW, batch)
		if got := recv(t, h.toAgent); got != want {
			t.Errorf("agent got %q for its batch %q; want %q", got, batch, want)
		}
	}
	send(t, h.clientW, `{"id":1,"method":"ok"}`)
	if got := recv(t, h.toAgent); got != `{"id":1,"method":"ok"}` {
		t.Errorf("agent got %q, want the first frame after the batches", got)
	}
	send(t, h.agentW, `{"id":1,"result":{}}`)
	if got := recv(t, h.toClient); got != `{"id":1,"result":{}}` {
		t.Errorf("client got %q, want the first frame after the batches", got)
	}
}

func TestOversizedFramesGetAnError(t *testing.T) {
	h := newHarness(t, Config{MaxFrame: 100 << 10})
	big := strings.Repeat("a", 200<<10)
	// A request: its sender gets an error with its id.
	go sendAsync(h.clientW, `{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"text":"`+big+`"}}`)
	got := recv(t, h.toClient)
	if !strings.Contains(got, `"id":"big"`) || !strings.Contains(got, "-32600") || !strings.Contains(got, "max-frame") {
		t.Errorf("client got %q; want an invalid-request error naming --max-frame", got)
	}
	// A response from the agent: the client, who waits for it, gets an error instead.
	go sendAsync(h.agentW, `{"jsonrpc":"2.0","id":9,"result":{"text":"`+big+`"}}`)
	got = recv(t, h.toClient)
	if !strings.Contains(got, `"id":9`) || !strings.Contains(got, "-32603") {
		t.Errorf("client got %q; want an internal error for id 9", got)
	}
	// Nothing else was lost.
	send(t, h.clientW, `{"id":2,"method":"after"}`)
	if got := recv(t, h.toAgent); got != `{"id":2,"method":"after"}` {
		t.Errorf("agent got %q, want the frame after the oversized one", got)
	}
}

func TestHugeFrameWithinLimitPasses(t *testing.T) {
	h := newHarness(t, Config{})
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"data":"` + strings.Repeat("QUJD", 5<<20) + `"}}`
	go sendAsync(h.clientW, frame)
	if got := recv(t, h.toAgent); got != frame {
		t.Errorf("agent got %d bytes, want the %d-byte frame unchanged", len(got), len(frame))
	}
}

func TestHookVerdicts(t *testing.T) {
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		switch string(f.Env.Method) {
		case "rewrite":
			return Verdict{Do: Rewrite, Line: []byte(`{"id":1,"method":"rewritten"}`)}
		case "answer":
			return Verdict{Do: Answer, Line: []byte(`{"id":2,"result":"answered"}`)}
		case "drop":
			return Verdict{Do: Drop}
		}
		return Verdict{}
	})
	h := newHarness(t, Config{Hook: hook})
	send(t, h.clientW, `{"id":1,"method":"rewrite"}`)
	if got := recv(t, h.toAgent); got != `{"id":1,"method":"rewritten"}` {
		t.Errorf("agent got %q, want the rewrite", got)
	}
	send(t, h.clientW, `{"id":2,"method":"answer"}`)
	if got := recv(t, h.toClient); got != `{"id":2,"result":"answered"}` {
		t.Errorf("client got %q, want the answer", got)
	}
	send(t, h.clientW, `{"method":"drop"}`)
	send(t, h.clientW, `{"method":"next"}`)
	if got := recv(t, h.toAgent); got != `{"method":"next"}` {
		t.Errorf("agent got %q, want the frame after the dropped one", got)
	}
}

// TestNoDataDropped sends numbered frames both ways while the sidecar injects
// frames of its own and makes calls: every number arrives once, in order, and
// the calls' responses never reach the client.
func TestNoDataDropped(t *testing.T) {
	const n = 20000
	h := newHarness(t, Config{})
	ctx := t.Context()

	// The agent: records what it gets, answers the sidecar's own calls, and
	// sends its own numbered frames.
	agentGot := make(chan []string, 1)
	go func() {
		var got []string
		for len(got) < n {
			line, err := h.toAgent.ReadString('\n')
			if err != nil {
				break
			}
			env, _ := Scan([]byte(strings.TrimSpace(line)))
			if isOwnID(env.ID) {
				fmt.Fprintf(h.agentW, `{"jsonrpc":"2.0","id":%s,"result":{"echo":%s}}`+"\n", env.ID, env.ID)
				continue
			}
			if env.MethodIs("injected") {
				continue
			}
			got = append(got, strings.TrimSpace(line))
		}
		agentGot <- got
	}()
	go func() {
		for i := range n {
			fmt.Fprintf(h.clientW, `{"jsonrpc":"2.0","id":%d,"method":"n"}`+"\n", i)
		}
	}()
	// Client ids that look like ours but are not, and plain numbers.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				var res struct{ Echo string }
				if err := h.relay.Call(ctx, "own", map[string]int{"i": i}, &res); err != nil {
					t.Errorf("Call: %v", err)
					return
				}
				if !strings.HasPrefix(res.Echo, OwnIDPrefix) {
					t.Errorf("Call result %q, want our own id echoed", res.Echo)
				}
				if i%50 == 0 {
					h.relay.Send(ClientToAgent, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"injected","params":{"w":%d}}`, w)))
				}
			}
		}()
	}
	go func() {
		for i := range n {
			fmt.Fprintf(h.agentW, `{"jsonrpc":"2.0","id":"s%d","result":%d}`+"\n", i, i)
		}
	}()
	clientGot := make([]string, 0, n)
	for len(clientGot) < n {
		clientGot = append(clientGot, recv(t, h.toClient))
	}
	wg.Wait()
	got := <-agentGot
	for i := range n {
		if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"n"}`, i); i >= len(got) || got[i] != want {
			t.Fatalf("agent frame %d = %q, want %q", i, at(got, i), want)
		}
		if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d","result":%d}`, i, i); clientGot[i] != want {
			t.Fatalf("client frame %d = %q, want %q", i, clientGot[i], want)
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<missing>"
}

func TestClientCannotUseOwnIDs(t *testing.T) {
	h := newHarness(t, Config{})
	send(t, h.clientW, `{"jsonrpc":"2.0","id":"acp-sidecar:1","method":"m"}`)
	got := recv(t, h.toClient)
	if !strings.Contains(got, `"id":"acp-sidecar:1"`) || !strings.Contains(got, "reserved") {
		t.Errorf("client got %q; want a refusal naming the reserved prefix", got)
	}
}

// TestCallKeepsRawParams: the sidecar's own request carries raw values as
// they were given, <, > and & included (a client's _meta goes to the agent
// as the client sent it), and is answered as usual.
func TestCallKeepsRawParams(t *testing.T) {
	h := newHarness(t, Config{})
	got := make(chan string, 1)
	go func() {
		line := recv(t, h.toAgent)
		got <- line
		env, _ := Scan([]byte(line))
		fmt.Fprintf(h.agentW, `{"jsonrpc":"2.0","id":%s,"result":{"ok":"<&>"}}`+"\n", env.ID)
	}()
	meta := json.RawMessage(`{"systemPrompt":{"append":"<b>bold</b> & \u003c"},"n":12345678901234567890}`)
	var res struct {
		OK string `json:"ok"`
	}
	if err := h.relay.Call(t.Context(), "session/new", map[string]any{"cwd": "/w", "_meta": meta}, &res); err != nil || res.OK != "<&>" {
		t.Fatalf("Call = %+v, %v; want the agent's result", res, err)
	}
	line := <-got
	if !strings.Contains(line, `"_meta":`+string(meta)) || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"acp-sidecar:`) || !strings.Contains(line, `"method":"session/new"`) {
		t.Errorf("the agent got %s; want the _meta byte for byte in a request of the sidecar's", line)
	}
}

func TestCallErrorComesBackTyped(t *testing.T) {
	h := newHarness(t, Config{})
	go func() {
		line := recv(t, h.toAgent)
		env, _ := Scan([]byte(line))
		fmt.Fprintf(h.agentW, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"bad value"}}`+"\n", env.ID)
	}()
	err := h.relay.Call(t.Context(), "session/set_mode", map[string]string{"modeId": "nope"}, nil)
	if err == nil || !strings.Contains(err.Error(), "bad value") {
		t.Errorf("Call error = %v; want the agent's error", err)
	}
}

func TestTraceRecordsEveryFrame(t *testing.T) {
	var buf syncBuffer
	h := newHarness(t, Config{Trace: NewTrace(&buf)})
	send(t, h.clientW, `{"id":1,"method":"m"}`)
	recv(t, h.toAgent)
	send(t, h.clientW, "garbage")
	recv(t, h.toClient)
	h.stop(t)
	h.relay.trace.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("trace has %d lines, want 3:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("trace line is not JSON: %q", l)
		}
	}
	if !strings.Contains(lines[1], `"malformed":"garbage"`) || !strings.Contains(lines[2], `"from":"sidecar"`) {
		t.Errorf("trace lines = %q", lines)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHoldKeepsOrder(t *testing.T) {
	var relay *Relay
	var release func(...[]byte)
	seen := make(chan string, 10)
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		seen <- string(f.Env.Method)
		if f.Dir == AgentToClient && f.Env.MethodIs("held") {
			release = relay.Hold(AgentToClient)
			return Verdict{Do: Drop}
		}
		if f.Dir == AgentToClient && f.Env.MethodIs("after2") {
			// The sidecar's own frame, sent once after1 has surely taken
			// its place: a frame's hook call says nothing of when it is
			// written, but the next frame's comes after.
			relay.Send(AgentToClient, []byte(`{"method":"own"}`))
		}
		return Verdict{}
	})
	h := newHarness(t, Config{Hook: hook})
	relay = h.relay
	send(t, h.agentW, `{"method":"before"}`)
	if got := recv(t, h.toClient); got != `{"method":"before"}` {
		t.Fatalf("client got %q", got)
	}
	send(t, h.agentW, `{"method":"held"}`)
	send(t, h.agentW, `{"method":"after1"}`)
	send(t, h.agentW, `{"method":"after2"}`)
	for m := range seen {
		if m == "after2" {
			break
		}
	}
	go release([]byte(`{"method":"held","rewritten":true}`), []byte(`{"method":"extra"}`))
	want := []string{`{"method":"held","rewritten":true}`, `{"method":"extra"}`, `{"method":"after1"}`, `{"method":"own"}`, `{"method":"after2"}`}
	for _, w := range want {
		if got := recv(t, h.toClient); got != w {
			t.Errorf("client got %q, want %q", got, w)
		}
	}
}

// TestNoWriteToAGoneAgent: between the end of an agent's output and the
// next agent, the sidecar's own calls fail at once instead of being written
// into the dead agent's pipe and waiting out their timeouts.
func TestNoWriteToAGoneAgent(t *testing.T) {
	exited := make(chan struct{})
	proceed := make(chan struct{})
	h := newHarness(t, Config{OnAgentExit: func(ctx context.Context) (io.Writer, io.Reader, bool) {
		close(exited)
		<-proceed
		return nil, nil, false
	}})
	h.agentW.Close() // the agent's output ends
	<-exited
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := h.relay.Call(ctx, "session/new", map[string]any{}, nil)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call to a gone agent: %v; want a failure at once", err)
	}
	close(proceed)
}

// longCount adds up what a relay's LongFrames is told.
type longCount struct {
	mu       sync.Mutex
	held     int64
	negative bool
}

func (c *longCount) add(delta int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held += delta
	c.negative = c.negative || c.held < 0
}

func (c *longCount) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// A process's soft memory limit is raised by what the relay keeps for long
// frames (Config.LongFrames): three buffers of each direction's longest, at
// most keepLong's, and nothing once the readers are done.
func TestLongFramesAreAccounted(t *testing.T) {
	var count longCount
	h := newHarness(t, Config{LongFrames: count.add})
	frame := func(method string, size int) string {
		return `{"jsonrpc":"2.0","method":"` + method + `","params":{"data":"` + strings.Repeat("A", size) + `"}}`
	}
	if got := count.now(); got != 0 {
		t.Fatalf("before any long frame: %d bytes held, want 0", got)
	}
	go sendAsync(h.agentW, frame("session/update", 2<<20))
	recv(t, h.toClient)
	afterAgent := count.now()
	if min := int64(keptLong * 2 << 20); afterAgent < min {
		t.Errorf("after the agent's 2 MiB frame: %d bytes held, want at least %d", afterAgent, min)
	}
	go sendAsync(h.clientW, frame("_note", 1<<20))
	recv(t, h.toAgent)
	afterClient := count.now()
	if min := afterAgent + keptLong*1<<20; afterClient < min {
		t.Errorf("after the client's 1 MiB frame too: %d bytes held, want at least %d", afterClient, min)
	}
	go sendAsync(h.agentW, frame("session/update", keepLong+(4<<20)))
	recv(t, h.toClient)
	if got, max := count.now(), afterClient+keptLong*(keepLong+ReadBufSize); got > max || got <= afterClient {
		t.Errorf("after a frame past keepLong: %d bytes held, want more than %d and at most %d", got, afterClient, max)
	}
	h.stop(t)
	if got := count.now(); got != 0 || count.negative {
		t.Errorf("after the relay ended: %d bytes held (below 0 on the way: %v), want 0", got, count.negative)
	}
}

// TestRunWaitsForTheClientReader: when the agent's output ends while the
// client's input is still open, Run closes that input and returns only once
// the client's reader has ended, with no error for the read its own close
// ended. Before, Run could return with the reader still in its read.
func TestRunWaitsForTheClientReader(t *testing.T) {
	cIn, cW := io.Pipe()
	defer cW.Close()
	aOut, aW := io.Pipe()
	toAgentR, toAgentW := io.Pipe()
	go io.Copy(io.Discard, toAgentR)
	in := &endWatch{r: cIn, ended: make(chan struct{})}
	relay := NewRelay(Config{ClientIn: in, ClientOut: io.Discard, AgentIn: toAgentW, AgentOut: aOut, Strict: true})
	done := make(chan error, 1)
	go func() { done <- relay.Run(context.Background()) }()
	aW.Close()
	if err := <-done; err != nil {
		t.Errorf("Run: %v, want nil", err)
	}
	select {
	case <-in.ended:
	default:
		t.Error("Run returned while the client's reader was still in its read")
	}
}

// endWatch is a client input that says when a read of it has failed.
type endWatch struct {
	r     *io.PipeReader
	once  sync.Once
	ended chan struct{}
}

func (w *endWatch) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil {
		w.once.Do(func() { close(w.ended) })
	}
	return n, err
}

func (w *endWatch) Close() error { return w.r.Close() }
