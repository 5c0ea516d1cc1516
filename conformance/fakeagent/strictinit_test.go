package fakeagent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// TestStrictInit: under -strict-init, and in the profiles of the agents
// that do it, a request before initialize gets codex-acp 2.6.0's exact
// error and is never handled, a notification before it is ignored, and
// after initialize the same request works. Without it the SDK serves the
// request, which is why a test of the restart needs the flag to see a
// request that overtook the sidecar's initialize.
func TestStrictInit(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		strict bool
	}{
		{[]string{"-strict-init"}, true},
		{[]string{"-profile", "codex-current"}, true},
		{[]string{"-profile", "claude-current"}, true},
		{[]string{"-profile", "codex-current", "-strict-init=false"}, false},
		{nil, false},
	} {
		t.Run(fmtArgs(tt.args), func(t *testing.T) {
			a := start(t, acpclient.Options{}, tt.args...)
			ctx := t.Context()
			if err := a.NotifyRaw(ctx, acp.AgentMethodSessionCancel, map[string]any{"sessionId": "fake-sess-1"}); err != nil {
				t.Fatal(err)
			}
			_, err := a.CallRaw(ctx, acp.AgentMethodSessionNew, map[string]any{"cwd": "/home/me", "mcpServers": []any{}})
			if !tt.strict {
				if err != nil {
					t.Fatalf("session/new before initialize without -strict-init: %v", err)
				}
				return
			}
			var re *acp.RequestError
			if !errors.As(err, &re) || re.Code != -32600 || re.Message != "Invalid request" || re.Data != "first ACP request must be initialize" {
				t.Fatalf("session/new before initialize: err = %v (%+v), want -32600 Invalid request, data \"first ACP request must be initialize\"", err, re)
			}
			want := bytes.TrimSuffix(fakeagent.NotInitializedLine(json.RawMessage(`"acpclient-raw-1"`)), []byte("\n"))
			if lines := a.Lines(); len(lines) != 1 || !bytes.Equal(lines[0], want) {
				t.Errorf("lines before initialize = %q, want only %s (the notification answers nothing)", lines, want)
			}
			if _, err := a.Initialize(ctx); err != nil {
				t.Fatal(err)
			}
			s, err := a.NewSession(ctx, "/home/me")
			if err != nil {
				t.Fatalf("session/new after initialize: %v", err)
			}
			if s.SessionId != "fake-sess-1" {
				t.Errorf("the first session after initialize is %q, want fake-sess-1: the refused session/new must not have made one", s.SessionId)
			}
			a.reply(ctx, t, s.SessionId, "hello")
		})
	}
}

// fmtArgs names a subtest after its flags.
func fmtArgs(args []string) string {
	if len(args) == 0 {
		return "no flags"
	}
	return strings.Join(args, " ")
}
