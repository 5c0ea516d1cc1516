package fakeagent_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// sessionCaps decodes agentCapabilities.sessionCapabilities from the
// initialize response on the wire, which has fields (delete) the SDK's
// types drop.
func sessionCaps(t *testing.T, a *agent) map[string]json.RawMessage {
	t.Helper()
	for _, l := range a.Lines() {
		var res struct {
			Result struct {
				AgentCapabilities struct {
					SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
				} `json:"agentCapabilities"`
				ProtocolVersion *int `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(l, &res) == nil && res.Result.ProtocolVersion != nil {
			return res.Result.AgentCapabilities.SessionCapabilities
		}
	}
	t.Fatal("no initialize response on the wire")
	return nil
}

func deleteSession(t *testing.T, a *agent, sid acp.SessionId) {
	t.Helper()
	got, err := a.CallRaw(t.Context(), "session/delete", map[string]any{"sessionId": sid})
	if err != nil {
		t.Fatalf("session/delete %s: %v", sid, err)
	}
	if string(got) != "{}" {
		t.Errorf("session/delete %s result = %s, want {}", sid, got)
	}
}

// TestDelete: with -delete the agent advertises sessionCapabilities.delete,
// answers session/delete with {}, and then treats the session as one it
// never had, in this life and (with -state) the next.
func TestDelete(t *testing.T) {
	dir := t.TempDir()
	state, log := filepath.Join(dir, "state.json"), filepath.Join(dir, "calls.jsonl")
	args := []string{"-delete", "-resume", "-list", "-state", state}
	a := start(t, acpclient.Options{}, append(args, "-call-log", log)...)
	s, ctx := a.session(t)
	gone := s.SessionId
	kept, err := a.NewSession(ctx, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"delete", "list", "resume"}, keys(sessionCaps(t, a))); diff != "" {
		t.Errorf("sessionCapabilities (-want +got):\n%s", diff)
	}
	if c := sessionCaps(t, a)["delete"]; string(c) != "{}" {
		t.Errorf("sessionCapabilities.delete = %s, want {}", c)
	}
	a.reply(ctx, t, gone, "one")

	deleteSession(t, a, gone)
	if _, err := a.Load(ctx, gone, "/home/me"); acpclient.Code(err) != -32002 {
		t.Errorf("load of a deleted session: err = %v, want -32002", err)
	}
	if _, err := a.Resume(ctx, gone, "/home/me"); acpclient.Code(err) != -32002 {
		t.Errorf("resume of a deleted session: err = %v, want -32002", err)
	}
	if _, _, err := a.Prompt(ctx, gone, "two"); acpclient.Code(err) != -32002 {
		t.Errorf("prompt on a deleted session: err = %v, want -32002", err)
	}
	l, err := a.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 1 || l.Sessions[0].SessionId != kept.SessionId {
		t.Errorf("list after delete = %+v, want only %s", l.Sessions, kept.SessionId)
	}
	// Per the RFD, deleting what is already gone, or never was, succeeds.
	deleteSession(t, a, gone)
	deleteSession(t, a, "never-was")
	if _, err := a.CallRaw(ctx, "session/delete", map[string]any{}); acpclient.Code(err) != -32602 {
		t.Errorf("session/delete without sessionId: err = %v, want -32602", err)
	}
	a.reply(ctx, t, kept.SessionId, "still here")

	var saved struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatal(err)
	}
	if len(saved.Sessions) != 1 || saved.Sessions[0].ID != string(kept.SessionId) {
		t.Errorf("-state after delete holds %+v, want only %s", saved.Sessions, kept.SessionId)
	}
	var deletes []string
	for _, c := range mustCalls(t, log) {
		if c.Method == "session/delete" {
			deletes = append(deletes, c.SessionID)
		}
	}
	if diff := cmp.Diff([]string{string(gone), string(gone), "never-was", ""}, deletes); diff != "" {
		t.Errorf("session/delete calls logged (-want +got):\n%s", diff)
	}
	a.cancel()
	a.exitCode(t)

	// The next life with the same -state has forgotten it too.
	b2 := start(t, acpclient.Options{}, args...)
	if _, err := b2.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Load(ctx, gone, "/home/me"); acpclient.Code(err) != -32002 {
		t.Errorf("load of a deleted session in the next life: err = %v, want -32002", err)
	}
	if r := b2.reply(ctx, t, kept.SessionId, "next life"); r.Turns != 2 {
		t.Errorf("kept session turns = %d, want 2", r.Turns)
	}
	n, err := b2.NewSession(ctx, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if n.SessionId != "fake-sess-3" {
		t.Errorf("new session id = %s, want fake-sess-3 (a deleted id is never reused)", n.SessionId)
	}
}

// TestDeleteOff: without -delete, session/delete is what the SDK makes of
// a method it does not know (-32601), nothing is advertised, and the
// session stays.
func TestDeleteOff(t *testing.T) {
	a := start(t, acpclient.Options{})
	s, ctx := a.session(t)
	if _, err := a.CallRaw(ctx, "session/delete", map[string]any{"sessionId": s.SessionId}); acpclient.Code(err) != -32601 {
		t.Errorf("session/delete: err = %v, want -32601", err)
	}
	if c, ok := sessionCaps(t, a)["delete"]; ok {
		t.Errorf("sessionCapabilities.delete = %s, want absent", c)
	}
	if r := a.reply(ctx, t, s.SessionId, "still here"); r.Turns != 1 {
		t.Errorf("turns = %d, want 1", r.Turns)
	}
	for _, l := range a.Lines() {
		if bytes.Contains(l, []byte(`"delete"`)) {
			t.Errorf("line mentions delete: %s", l)
		}
	}
}

func keys(m map[string]json.RawMessage) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
