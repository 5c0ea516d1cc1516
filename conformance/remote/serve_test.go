//go:build linux

package remote

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// The SDK's own HTTP and WebSocket clients, unchanged, run a session
// through serve: new, a mode and an option set, prompts, /reset, and the
// config stays what the client chose.
func TestSDKClientsThroughServe(t *testing.T) {
	for _, transport := range []string{"http", "ws"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			srv := startServe(t, nil)
			c := sdkClient(t, transport, srv.URL, srv.Token, acpclient.Options{})
			ctx := ctxFor(t)
			init, err := c.Initialize(ctx)
			if err != nil {
				t.Fatalf("initialize: %v\nserve:\n%s", err, srv.Stderr)
			}
			if init.Meta == nil || init.Meta["transport"] == nil {
				t.Errorf("initialize's _meta says nothing of the transport: %v", init.Meta)
			}
			sess, err := c.NewSession(ctx, t.TempDir())
			if err != nil {
				t.Fatalf("session/new: %v", err)
			}
			if err := c.SetMode(ctx, sess.SessionId, "plan"); err != nil {
				t.Fatalf("set_mode: %v", err)
			}
			if _, err := c.SetConfigOption(ctx, sess.SessionId, "effort", "high"); err != nil {
				t.Fatalf("set_config_option: %v", err)
			}
			stop, text, err := c.Prompt(ctx, sess.SessionId, "hello")
			if err != nil || stop != "end_turn" {
				t.Fatalf("prompt: %v %v", stop, err)
			}
			if !strings.Contains(text, "mode=plan") || !strings.Contains(text, "effort=high") {
				t.Errorf("the turn ran on another config: %q", text)
			}
			if _, _, err := c.Prompt(ctx, sess.SessionId, "/reset"); err != nil {
				t.Fatalf("/reset: %v", err)
			}
			_, text, err = c.Prompt(ctx, sess.SessionId, "after the reset")
			if err != nil {
				t.Fatalf("prompt after /reset: %v", err)
			}
			if !strings.Contains(text, "mode=plan") || !strings.Contains(text, "effort=high") {
				t.Errorf("after /reset the turn ran on another config: %q", text)
			}
		})
	}
}

// A client of the SDK whose network drops mid-turn reconnects as the SDK
// says to (a new connection, initialize, session/load): the turn ran to its
// end on the server while it was away, and the load gives it all of it.
func TestSDKClientLoadsWhatRanWhileAway(t *testing.T) {
	for _, transport := range []string{"http", "ws"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			srv := startServe(t, nil)
			px := startFaultProxy(t, hostOf(t, srv.URL))
			ctx := ctxFor(t)
			first := sdkClient(t, transport, "http://"+px.addr(), srv.Token, acpclient.Options{})
			if _, err := first.Initialize(ctx); err != nil {
				t.Fatal(err)
			}
			cwd := t.TempDir()
			sess, err := first.NewSession(ctx, cwd)
			if err != nil {
				t.Fatal(err)
			}
			sid := sess.SessionId
			if err := first.SetMode(ctx, sid, "plan"); err != nil {
				t.Fatal(err)
			}
			const n, size = 200, 64 // within what the record keeps of a turn's text
			res := promptAsync(ctx, first, sid, fmt.Sprintf("stream %d %d", n, size))
			if _, err := first.WaitUpdates(ctx, sid, func(u []acp.SessionNotification) bool { return chunks(u) >= 1 }); err != nil {
				t.Fatal(err)
			}
			px.cut()
			if r := <-res; r.err == nil {
				t.Logf("the turn ended before the drop reached the client (%v); the load must still give it", r.stop)
			}
			second := sdkClient(t, transport, "http://"+px.addr(), srv.Token, acpclient.Options{})
			if _, err := second.Initialize(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := second.Load(ctx, sid, cwd); err != nil {
				t.Fatalf("load after the drop: %v\nserve:\n%s", err, srv.Stderr)
			}
			text := acpclient.AgentText(second.Updates(sid))
			if !strings.Contains(text, fmt.Sprintf("text=stream %d %d", n, size)) || len(text) < n*size {
				t.Errorf("the load replayed %d bytes of agent text, not the whole turn (%d bytes of stream at least): %.200q", len(text), n*size, text)
			}
			// The session came back on the agent that ran it: no rebuild.
			if log := readFile(filepath.Join(srv.StateDir, "sidecar.log")); !strings.Contains(log, "took over a detached one's agent") {
				t.Errorf("the new connection did not take over the agent that ran the session")
			}
			_, reply, err := second.Prompt(ctx, sid, "after the load")
			if err != nil || !strings.Contains(reply, "mode=plan") {
				t.Errorf("the next turn on the new connection: %q %v", reply, err)
			}
		})
	}
}

// Several agents behind serve, as behind one sidecar on stdio: a session
// starts on the default agent and moves to another with /agent, over the
// network.
func TestServeSeveralAgents(t *testing.T) {
	t.Parallel()
	bin := sidecar.Path(t)
	srv := startServe(t, []string{
		"--agent", "alpha=" + bin + " fakeagent -id-prefix alpha-",
		"--agent", "beta=" + bin + " fakeagent -id-prefix beta-",
		"--default-agent", "alpha",
	})
	c := sdkClient(t, "http", srv.URL, srv.Token, acpclient.Options{})
	ctx := ctxFor(t)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := c.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, text, err := c.Prompt(ctx, sess.SessionId, "on alpha")
	if err != nil || !strings.Contains(text, "session=alpha-") {
		t.Fatalf("the first turn: %q %v", text, err)
	}
	if _, _, err := c.Prompt(ctx, sess.SessionId, "/agent beta"); err != nil {
		t.Fatalf("/agent beta: %v", err)
	}
	_, text, err = c.Prompt(ctx, sess.SessionId, "on beta")
	if err != nil || !strings.Contains(text, "session=beta-") {
		t.Errorf("the turn after /agent beta: %q %v", text, err)
	}
}
