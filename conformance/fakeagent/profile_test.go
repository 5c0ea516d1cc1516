package fakeagent_test

import (
	"bytes"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// TestCurrentProfiles: claude-current and codex-current preset what
// shared/acp/agents.md observed of claude-agent-acp 0.101.0 and codex-acp
// 2.6.0, each switch seen on the wire.
func TestCurrentProfiles(t *testing.T) {
	tests := []struct {
		profile      string
		load         bool
		caps         []string
		options      []string
		newModels    bool
		reopenModes  bool   // modes in the resume result
		subagent     string // the reply's subagent field
		effortOnFast bool   // fast-1 has an effort option (not model-dependent)
	}{
		{profile: "claude-current", load: true, caps: []string{"close", "delete", "fork", "list", "resume"},
			options: []string{"model", "effort", "mode", "verbosity"}, reopenModes: true, effortOnFast: true},
		// v2-current is claude-current to a v1 client.
		{profile: "v2-current", load: true, caps: []string{"close", "delete", "fork", "list", "resume"},
			options: []string{"model", "effort", "mode", "verbosity"}, reopenModes: true, effortOnFast: true},
		{profile: "codex-current", caps: []string{"close", "delete", "fork", "list", "resume"},
			options: []string{"model", "effort", "mode", "verbosity"}, newModels: true, subagent: "fake-sub-1"},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			a := start(t, acpclient.Options{}, "-profile", tt.profile)
			ctx := t.Context()
			initSubagents(t, a, `{}`)
			want := bytes.TrimSuffix(fakeagent.AuthStatusLine(), []byte("\n"))
			if lines := a.Lines(); len(lines) < 1 || !bytes.Contains(lines[0], []byte(`"protocolVersion"`)) {
				t.Fatalf("first line = %q, want the initialize response", lines)
			}
			if _, err := a.WaitLine(ctx, func(l []byte) bool { return bytes.Equal(l, want) }); err != nil {
				t.Errorf("no auth notice: %v", err)
			}
			if got := bytes.Contains(a.Lines()[0], []byte(`"loadSession":true`)); got != tt.load {
				t.Errorf("loadSession = %v, want %v", got, tt.load)
			}
			if diff := cmp.Diff(tt.caps, keys(sessionCaps(t, a))); diff != "" {
				t.Errorf("sessionCapabilities (-want +got):\n%s", diff)
			}

			s, err := a.NewSession(ctx, "/home/me")
			if err != nil {
				t.Fatal(err)
			}
			sid := s.SessionId
			if diff := cmp.Diff(tt.options, optionIDs(s.ConfigOptions)); diff != "" {
				t.Errorf("configOptions (-want +got):\n%s", diff)
			}
			if s.Modes == nil || (s.Models != nil) != tt.newModels {
				t.Errorf("session/new modes/models = %v/%v, want true/%v", s.Modes != nil, s.Models != nil, tt.newModels)
			}
			opts, err := a.SetConfigOption(ctx, sid, "model", "fast-1")
			if err != nil {
				t.Fatal(err)
			}
			if got := option(opts, "effort") != nil; got != tt.effortOnFast {
				t.Errorf("effort on fast-1 = %v, want %v", got, tt.effortOnFast)
			}

			r := a.reply(ctx, t, sid, "subagent")
			if r.Extra["subagent"] != tt.subagent {
				t.Errorf("subagent = %q, want %q", r.Extra["subagent"], tt.subagent)
			}
			us := a.Updates(sid)
			for _, id := range chunkIDs(us) {
				if id != fakeagent.MessageID(string(sid), 1) {
					t.Errorf("chunk messageId = %q, want turn 1's", id)
				}
			}
			if len(us) < 2 || us[len(us)-2].Update.SessionInfoUpdate == nil || us[len(us)-1].Update.UsageUpdate == nil {
				t.Errorf("turn ends with %v, want session_info_update, usage_update", kinds(us))
			}

			res, err := a.Resume(ctx, sid, "/home/me")
			if err != nil {
				t.Fatal(err)
			}
			if (res.Modes != nil) != tt.reopenModes || res.Models != nil || len(res.ConfigOptions) == 0 {
				t.Errorf("resume modes/models/options = %v/%v/%d, want %v/false/some", res.Modes != nil, res.Models != nil, len(res.ConfigOptions), tt.reopenModes)
			}
			if _, err := a.CallRaw(ctx, acp.AgentMethodSessionClose, map[string]any{"sessionId": sid}); err != nil {
				t.Errorf("close: %v", err)
			}
			if _, err := a.Load(ctx, sid, "/home/me"); tt.load && err != nil {
				t.Errorf("load after close: %v", err)
			} else if !tt.load && acpclient.Code(err) != -32601 {
				t.Errorf("load without loadSession: err = %v, want -32601", err)
			}
			deleteSession(t, a, sid)
			if _, err := a.Resume(ctx, sid, "/home/me"); acpclient.Code(err) != -32002 {
				t.Errorf("resume after delete: err = %v, want -32002", err)
			}
		})
	}
}
