//go:build linux

package remote

import (
	"strings"
	"testing"

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
			c := sdkClient(t, transport, srv.url, srv.token, acpclient.Options{})
			ctx := ctxFor(t)
			init, err := c.Initialize(ctx)
			if err != nil {
				t.Fatalf("initialize: %v\nserve:\n%s", err, srv.stderr)
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
