package acpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// TestMain doubles as the fake agent: the tests re-execute this binary with
// FAKEAGENT_MAIN=1, so every test runs against a real subprocess without a
// separate build step.
func TestMain(m *testing.M) {
	if os.Getenv("FAKEAGENT_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := fakeagent.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func agentArgv(args ...string) []string { return append([]string{os.Args[0]}, args...) }

func agentOpts(t *testing.T, opts acpclient.Options) acpclient.Options {
	opts.Env = append(opts.Env, "FAKEAGENT_MAIN=1")
	if os.Getenv("GORACE") == "" {
		// A -race binary sleeps a second before exiting unless told not to.
		opts.Env = append(opts.Env, "GORACE=atexit_sleep_ms=0")
	}
	if opts.Stderr == nil {
		opts.Stderr = testWriter{t}
	}
	return opts
}

// testWriter logs the agent's stderr. Close waits for the copy to finish,
// so it never logs after the test ends.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("agent stderr: %s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

func startAgent(t *testing.T, opts acpclient.Options, args ...string) *acpclient.Client {
	t.Helper()
	c, err := acpclient.Start(t.Context(), agentArgv(args...), agentOpts(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func session(t *testing.T, c *acpclient.Client) acp.SessionId {
	t.Helper()
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession(t.Context(), "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	return s.SessionId
}

func TestClientAgainstFakeAgent(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	c := startAgent(t, acpclient.Options{Files: map[string]string{"/home/me/fake.txt": "data"}}, "-call-log", calls)
	ctx := t.Context()
	sid := session(t, c)

	stop, text, err := c.Prompt(ctx, sid, "hello")
	if err != nil || stop != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %q %v", stop, err)
	}
	if r, ok := fakeagent.ParseReply(text); !ok || r.Text != "hello" || r.Turns != 1 {
		t.Errorf("reply = %+v, %v", r, ok)
	}
	if _, err := c.SetConfigOption(ctx, sid, "model", "deep-3"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetMode(ctx, sid, "plan"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetModel(ctx, sid, "fast-1"); err != nil {
		t.Fatal(err)
	}
	_, text, err = c.Prompt(ctx, sid, "ask permission")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := fakeagent.ParseReply(text)
	if r.Model != "fast-1" || r.Mode != "plan" || r.Effort != "-" || r.Extra["permission"] != "selected:allow" || !strings.HasPrefix(r.Extra["read"], "ok:4:") {
		t.Errorf("reply = %+v", r)
	}
	if _, _, err := c.Prompt(ctx, sid, "ext"); err != nil {
		t.Fatal(err)
	}
	if n := c.Notifications(); len(n) != 1 || n[0].Method != "_fake/notice" {
		t.Errorf("notifications = %+v", n)
	}

	got, err := c.CallRaw(ctx, "_fake/echo", map[string]any{"x": "<>&"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"x":"\u003c\u003e\u0026"}` { // both sides' encoding/json escape HTML
		t.Errorf("_fake/echo = %s", got)
	}
	got, err = c.CallRaw(ctx, "session/set_mode", map[string]any{"sessionId": sid, "modeId": "ask"})
	if err != nil || string(got) != `{}` {
		t.Errorf("raw session/set_mode = %s, %v", got, err)
	}
	if _, err := c.CallRaw(ctx, "session/set_mode", map[string]any{"sessionId": sid, "modeId": "nope"}); acpclient.Code(err) != -32602 {
		t.Errorf("raw bad set_mode: err = %v, want -32602", err)
	}
	if _, err := c.CallRaw(ctx, "no/such", nil); acpclient.Code(err) != -32601 {
		t.Errorf("unknown method: err = %v, want -32601", err)
	}

	if code, err := c.Close(); code != 0 || err != nil {
		t.Errorf("Close = %d, %v; want 0, nil", code, err)
	}
	log, err := fakeagent.ReadCallLog(calls)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"initialize", "session/new", "session/prompt", "session/set_config_option", "session/set_mode",
		"session/set_model", "session/prompt", "session/prompt", "_fake/echo", "session/set_mode", "session/set_mode", "no/such"}
	if diff := cmp.Diff(want, fakeagent.Methods(log)); diff != "" {
		t.Errorf("call log (-want +got):\n%s", diff)
	}
}

func TestAgentExits(t *testing.T) {
	t.Run("crash now", func(t *testing.T) {
		c := startAgent(t, acpclient.Options{})
		sid := session(t, c)
		if _, _, err := c.Prompt(t.Context(), sid, "crash now"); err == nil {
			t.Fatal("prompt answered; want the agent gone")
		}
		if code, err := c.Wait(t.Context()); code != 3 || err != nil {
			t.Errorf("Wait = %d, %v; want 3", code, err)
		}
		if code, err := c.Close(); code != 3 || err != nil {
			t.Errorf("Close = %d, %v; want 3", code, err)
		}
	})
	t.Run("die-after", func(t *testing.T) {
		c := startAgent(t, acpclient.Options{}, "-die-after", "1")
		sid := session(t, c)
		if _, _, err := c.Prompt(t.Context(), sid, "one"); err != nil {
			// The agent answers and exits at once, and the SDK picks at
			// random between the answer and the peer's end when both are
			// ready: the answer must be on the wire all the same.
			if !slices.ContainsFunc(c.Lines(), func(l []byte) bool { return bytes.Contains(l, []byte(`"stopReason":"end_turn"`)) }) {
				t.Fatalf("prompt before -die-after: %v, and no end_turn answer on the wire", err)
			}
		}
		if code, err := c.Wait(t.Context()); code != 1 || err != nil {
			t.Errorf("Wait = %d, %v; want 1", code, err)
		}
	})
}

func TestWaitUpdatesEnds(t *testing.T) {
	c := startAgent(t, acpclient.Options{})
	sid := session(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.WaitUpdates(ctx, sid, func([]acp.SessionNotification) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitUpdates on a cancelled ctx: %v", err)
	}
	c.Close()
	if _, err := c.WaitUpdates(t.Context(), sid, func([]acp.SessionNotification) bool { return false }); !errors.Is(err, acpclient.ErrEnded) {
		t.Errorf("WaitUpdates after the peer ended: %v", err)
	}
}

func TestRawClient(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "stdin"), filepath.Join(dir, "stdout")
	ctx := t.Context()
	c, err := acpclient.StartRaw(ctx, agentArgv("-stdin-log", in, "-stdout-log", out), agentOpts(t, acpclient.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	script := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":"two","method":"session/new","params":{"cwd":"/w","mcpServers":[],"_meta":{"n":12345678901234567890}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"meta"}]}}`,
	}
	waits := []string{`1`, `"two"`, `3`}
	var sent []byte
	for i, l := range script {
		if err := c.WriteLine(l); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, l+"\n"...)
		if _, err := c.WaitLine(ctx, acpclient.HasID(waits[i])); err != nil {
			t.Fatal(err)
		}
	}
	meta := bytes.TrimSuffix(fakeagent.MetaLine("fake-sess-1"), []byte("\n"))
	if _, err := c.WaitLine(ctx, func(l []byte) bool { return bytes.Equal(l, meta) }); err != nil {
		t.Errorf("raw _meta line not received exactly: %v", err)
	}
	if code, err := c.Close(); code != 0 || err != nil {
		t.Errorf("Close = %d, %v", code, err)
	}
	gotIn, _ := os.ReadFile(in)
	gotOut, _ := os.ReadFile(out)
	if !bytes.Equal(gotIn, sent) {
		t.Errorf("stdin log:\n%s\nwant:\n%s", gotIn, sent)
	}
	if !bytes.Equal(gotOut, c.Output()) {
		t.Errorf("stdout log:\n%s\nclient received:\n%s", gotOut, c.Output())
	}
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	lines := c.Lines()
	if err := json.Unmarshal(lines[0], &res); err != nil || !bytes.Contains(res.Result, []byte(`"loadSession":true`)) {
		t.Errorf("initialize answer = %s", lines[0])
	}
}
