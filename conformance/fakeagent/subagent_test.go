package fakeagent_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// initSubagents sends initialize with clientCapabilities.subagents set to
// caps (raw JSON), which the SDK's ClientCapabilities cannot carry.
func initSubagents(t *testing.T, a *agent, caps string) {
	t.Helper()
	params := json.RawMessage(`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"subagents":` + caps + `}}`)
	if _, err := a.CallRaw(t.Context(), "initialize", params); err != nil {
		t.Fatal(err)
	}
}

// frame is one line as the subagent checks read it.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
			SessionID     string `json:"sessionId"`
			Title         string `json:"title"`
			Description   string `json:"description"`
			Status        string `json:"status"`
			MessageID     string `json:"messageId"`
			State         *struct {
				State      string `json:"state"`
				StopReason string `json:"stopReason"`
			} `json:"state"`
		} `json:"update"`
	} `json:"params"`
	Result *struct {
		StopReason string `json:"stopReason"`
	} `json:"result"`
}

// describe names a frame for sequence checks: METHOD@SESSION:KIND[:DETAIL].
func describe(l []byte) string {
	var f frame
	if json.Unmarshal(l, &f) != nil {
		return "unparsed"
	}
	switch {
	case f.Method == "session/update":
		d := "session/update@" + f.Params.SessionID + ":" + f.Params.Update.SessionUpdate
		u := f.Params.Update
		switch {
		case u.SessionUpdate == "subagent_update" && u.State != nil:
			d += ":" + u.SessionID + ":" + u.State.State + u.State.StopReason
		case u.Status != "":
			d += ":" + u.Status
		}
		return d
	case f.Method != "":
		return f.Method + "@" + f.Params.SessionID
	case f.Result != nil && f.Result.StopReason != "":
		return "prompt result:" + f.Result.StopReason
	}
	return "response"
}

// TestSubagents: under -subagents, with a client that advertised
// subagents, the prompt "subagent" announces a child session on the parent
// before any frame names the child, runs the child's updates and a
// permission request on it, reports it idle, and then ends the parent's
// turn with its reply line.
func TestSubagents(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	opts := acpclient.Options{Permission: func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
		return acp.NewRequestPermissionOutcomeSelected("reject")
	}}
	// -commands=false: no available_commands_update trails the session/new
	// response into the turn's lines.
	a := start(t, opts, "-subagents", "-message-ids", "-commands=false", "-state", state)
	initSubagents(t, a, `{}`)
	ctx := t.Context()
	s, err := a.NewSession(ctx, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	parent := string(s.SessionId)
	mark := len(a.Lines())
	r := a.reply(ctx, t, s.SessionId, "subagent")
	if diff := cmp.Diff(map[string]string{"subagent": "fake-sub-1", "permission": "selected:reject"}, r.Extra); diff != "" {
		t.Errorf("reply extra (-want +got):\n%s", diff)
	}
	if p := a.Permissions(); len(p) != 1 || p[0].SessionId != "fake-sub-1" || p[0].ToolCall.ToolCallId != "fake-sub-1-tool-2" {
		t.Errorf("permission requests = %+v, want one for fake-sub-1's tool fake-sub-1-tool-2", p)
	}

	turn := a.Lines()[mark:]
	var got []string
	for _, l := range turn {
		if d := describe(l); !strings.Contains(d, ":agent_message_chunk") || strings.Contains(d, "fake-sub-1") {
			got = append(got, d)
		}
	}
	want := []string{
		"session/update@" + parent + ":subagent_update:fake-sub-1:running",
		"session/update@fake-sub-1:agent_message_chunk",
		"session/update@fake-sub-1:tool_call:pending",
		"session/update@fake-sub-1:tool_call_update:completed",
		"session/request_permission@fake-sub-1",
		"session/update@" + parent + ":subagent_update:fake-sub-1:idleend_turn",
		"prompt result:end_turn",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames of the turn, the parent's reply chunks left out (-want +got):\n%s", diff)
	}
	// Nothing before the announcement names the child, and the
	// announcement has the draft's fields.
	for _, l := range a.Lines()[:mark] {
		if bytes.Contains(l, []byte("fake-sub-")) {
			t.Errorf("line before the turn names a child: %s", l)
		}
	}
	var first frame
	if err := json.Unmarshal(turn[0], &first); err != nil {
		t.Fatal(err)
	}
	if u := first.Params.Update; u.Title != "Subagent 1" || u.Description == "" {
		t.Errorf("announcement = %s, want a title and a description", turn[0])
	}
	// The child's chunk carries its own message id; the parent's reply
	// comes after the child's work and is all the parent's text.
	var chunk frame
	if err := json.Unmarshal(turn[1], &chunk); err != nil {
		t.Fatal(err)
	}
	if chunk.Params.Update.MessageID != fakeagent.MessageID("fake-sub-1", 1) {
		t.Errorf("child chunk messageId = %q", chunk.Params.Update.MessageID)
	}
	if text := acpclient.AgentText(a.Updates("fake-sub-1")); text != "fake-subagent: child of "+parent+"\n" {
		t.Errorf("child text = %q", text)
	}

	if r := a.reply(ctx, t, s.SessionId, "subagent"); r.Extra["subagent"] != "fake-sub-2" {
		t.Errorf("second child = %q, want fake-sub-2", r.Extra["subagent"])
	}
	a.cancel()
	a.exitCode(t)

	// The count goes on in the next life with the same -state.
	b := start(t, acpclient.Options{}, "-subagents", "-state", state)
	initSubagents(t, b, `{}`)
	if r := b.reply(ctx, t, s.SessionId, "subagent"); r.Extra["subagent"] != "fake-sub-3" || r.Extra["permission"] != "selected:allow" {
		t.Errorf("next life's child = %v, want fake-sub-3 allowed", r.Extra)
	}
}

// TestSubagentsNotNegotiated: a client that did not advertise subagents
// (left out, null) gets no subagent frames at all, only the reply field;
// without -subagents the prompt is plain text.
func TestSubagentsNotNegotiated(t *testing.T) {
	for _, tt := range []struct {
		name, caps string // caps "": the SDK's initialize, without the field
		args       []string
		want       map[string]string
	}{
		{name: "left out", args: []string{"-subagents"}, want: map[string]string{"subagent": "not-negotiated"}},
		{name: "null", caps: "null", args: []string{"-subagents"}, want: map[string]string{"subagent": "not-negotiated"}},
		{name: "without -subagents", caps: "{}", want: nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := start(t, acpclient.Options{}, tt.args...)
			ctx := t.Context()
			if tt.caps == "" {
				if _, err := a.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				initSubagents(t, a, tt.caps)
			}
			s, err := a.NewSession(ctx, "/home/me")
			if err != nil {
				t.Fatal(err)
			}
			r := a.reply(ctx, t, s.SessionId, "subagent")
			if diff := cmp.Diff(tt.want, r.Extra); diff != "" {
				t.Errorf("reply extra (-want +got):\n%s", diff)
			}
			for _, l := range a.Lines() {
				if bytes.Contains(l, []byte("fake-sub-")) || bytes.Contains(l, []byte("subagent_update")) {
					t.Errorf("subagent frame without negotiation: %s", l)
				}
			}
			if p := a.Permissions(); len(p) != 0 {
				t.Errorf("permission requests: %+v", p)
			}
		})
	}
}
