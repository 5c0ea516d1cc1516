package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// TestMain lets the test binary be the real CLI: testscript.Main puts a copy
// named acp-sidecar on PATH, and a process started under that name runs
// main(). So `acp-sidecar --state-dir T -- acp-sidecar fakeagent` starts a
// real sidecar in front of a real fake agent, over real pipes, with nothing
// built by `go build`.
func TestMain(m *testing.M) {
	// A -race child sleeps a second at exit unless told otherwise; every
	// process below inherits this.
	gorace := "atexit_sleep_ms=0"
	if v := os.Getenv("GORACE"); v != "" {
		gorace = v + " " + gorace
	}
	os.Setenv("GORACE", gorace)
	// Every sidecar below panics where it would answer a request twice or
	// never (proxy.Config.Strict), so no test passes on such a bug.
	os.Setenv("ACP_SIDECAR_STRICT_ANSWERS", "1")
	testscript.Main(m, map[string]func(){"acp-sidecar": main})
}

// waitBound bounds every wait for a process or a line. Nothing asserts how
// long anything takes; this only turns a hang into a failure.
const waitBound = 30 * time.Second

// lifeBound bounds the life of a process a test starts. A process lives
// through the test's every wait, a lease's expiry and another host's start
// among them: on a loaded 2-core runner their sum passed waitBound, and
// the process was killed mid-test.
const lifeBound = 5 * time.Minute

// boundedCtx is the context a test's process runs under.
func boundedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), lifeBound)
	t.Cleanup(cancel)
	return ctx
}

// startPeer runs argv (found on PATH) as a real process with a raw line
// client on its stdio. The peer is killed, group and all, when the test ends.
func startPeer(ctx context.Context, t *testing.T, stderr *acpclient.Buffer, argv ...string) *peer {
	t.Helper()
	opts := acpclient.Options{CloseTimeout: waitBound}
	if stderr != nil {
		opts.Stderr = stderr
	}
	c, err := acpclient.StartRaw(ctx, argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kill()
		_, _ = c.Close()
	})
	return &peer{t: t, ctx: ctx, c: c}
}

// sidecarArgv is the sidecar in front of agent, with a state dir of its own.
func sidecarArgv(t *testing.T, flags []string, agent ...string) []string {
	argv := []string{"acp-sidecar", "--state-dir", t.TempDir()}
	argv = append(argv, flags...)
	argv = append(argv, "--")
	return append(argv, agent...)
}

// peer is a scripted raw client: it writes exact lines, remembers every byte
// it wrote, and reads the peer's lines with a cursor, so each wait looks only
// at what arrived after the previous one.
type peer struct {
	t    *testing.T
	ctx  context.Context
	c    *acpclient.RawClient
	sent bytes.Buffer
	seen int // lines before this index are consumed
	bars int
}

// send writes each line and a newline.
func (p *peer) send(lines ...string) {
	p.t.Helper()
	for _, l := range lines {
		p.sent.WriteString(l)
		p.sent.WriteByte('\n')
		if err := p.c.WriteLine(l); err != nil {
			p.t.Fatal(err)
		}
	}
}

// await returns the first line after the cursor that matches pred and moves
// the cursor past it.
func (p *peer) await(what string, pred func([]byte) bool) []byte {
	p.t.Helper()
	from := p.seen
	for {
		lines, err := p.c.WaitLines(p.ctx, from+1)
		if err != nil {
			p.t.Fatalf("waiting for %s: %v\nlast lines:\n%s", what, err, lastLines(p.c.Lines(), 5))
		}
		for i := from; i < len(lines); i++ {
			if pred(lines[i]) {
				p.seen = i + 1
				return lines[i]
			}
		}
		from = len(lines)
	}
}

// call sends a request line and waits for the response with id.
func (p *peer) call(id, line string) []byte {
	p.t.Helper()
	p.send(line)
	return p.await("response "+id, acpclient.HasID(id))
}

// barrier makes the exchange deterministic. The fake agent answers each
// request on its own goroutine and writes some updates right after a
// response, under the SDK's write lock; an echo request answered after them
// proves everything the previous step caused has been written, so the next
// step's output cannot interleave with it.
func (p *peer) barrier() {
	p.t.Helper()
	p.bars++
	id := fmt.Sprintf(`"barrier-%d"`, p.bars)
	p.call(id, `{"jsonrpc":"2.0","id":`+id+`,"method":"_fake/echo","params":{"barrier":`+fmt.Sprint(p.bars)+`}}`)
}

// lines is every complete line received so far.
func (p *peer) lines() [][]byte { return p.c.Lines() }

// finish closes the peer's stdin and waits for it to exit by itself.
func (p *peer) finish() int {
	p.t.Helper()
	if err := p.c.CloseStdin(); err != nil {
		p.t.Fatal(err)
	}
	code, err := p.c.Wait(p.ctx)
	if err != nil {
		p.t.Fatalf("peer did not exit after stdin EOF: %v", err)
	}
	return code
}

// idOf returns a line's raw JSON-RPC id.
func rawID(t *testing.T, line []byte) string {
	t.Helper()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(line, &m); err != nil || m.ID == nil {
		t.Fatalf("no id in %s (%v)", clip(line), err)
	}
	return string(m.ID)
}

// rpcError decodes a line as an error response.
func decodeRPCError(t *testing.T, line []byte) (id string, code int, msg string) {
	t.Helper()
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil || m.Error == nil {
		t.Fatalf("not an error response: %s (%v)", clip(line), err)
	}
	return string(m.ID), m.Error.Code, m.Error.Message
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// short keeps failure messages readable when lines are megabytes long.
func clip(b []byte) string {
	const max = 300
	if len(b) <= max {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:max], len(b))
}

func lastLines(lines [][]byte, n int) string {
	var sb strings.Builder
	for _, l := range lines[max(0, len(lines)-n):] {
		sb.WriteString(clip(l))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// diffStreams reports where two byte streams first differ, line by line.
func diffStreams(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	w, g := bytes.SplitAfter(want, []byte("\n")), bytes.SplitAfter(got, []byte("\n"))
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl []byte
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if !bytes.Equal(wl, gl) {
			return fmt.Sprintf("first difference at line %d of %d/%d:\nwant %s\ngot  %s", i+1, len(w), len(g), clip(wl), clip(gl))
		}
	}
	return fmt.Sprintf("streams differ (%d vs %d bytes)", len(want), len(got))
}

// find returns the first line at or after index from (and before the cursor)
// that contains s, or nil.
func (p *peer) find(from int, s string) []byte {
	lines := p.lines()
	for _, l := range lines[from:min(p.seen, len(lines))] {
		if bytes.Contains(l, []byte(s)) {
			return l
		}
	}
	return nil
}

// regression fails the test, naming the bug a check guards against.
func regression(t *testing.T, bug, format string, args ...any) {
	t.Helper()
	t.Errorf("regression (%s): "+format, append([]any{bug}, args...)...)
}
