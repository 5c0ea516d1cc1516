package fakeagent_test

import (
	"os"
	"path/filepath"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// TestState: with -state, a second agent process (here a second Main) can
// load and resume the sessions of the first one, replaying its history;
// config goes back to the defaults unless -load-keeps-config; new session
// ids continue after the persisted ones.
func TestState(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")

	first := start(t, acpclient.Options{}, "-state", state, "-resume")
	s, ctx := first.session(t)
	sid := s.SessionId
	if err := first.SetModel(ctx, sid, "deep-3"); err != nil {
		t.Fatal(err)
	}
	first.reply(ctx, t, sid, "one")
	first.reply(ctx, t, sid, "two", "three")
	if _, err := first.NewSession(ctx, "/other"); err != nil { // fake-sess-2
		t.Fatal(err)
	}
	first.cancel() // the first life ends; its sessions are on disk
	first.exitCode(t)
	if _, err := os.Stat(state); err != nil {
		t.Fatal(err)
	}

	t.Run("load", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-state", state)
		if _, err := a.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := a.Load(ctx, sid, "/home/me")
		if err != nil {
			t.Fatalf("load of a persisted session: %v", err)
		}
		if got := option(res.ConfigOptions, "model").CurrentValue; got != "smart-2" {
			t.Errorf("model after load = %s, want the default smart-2", got)
		}
		var users []string
		var replay []acp.SessionNotification
		for _, u := range a.Updates(sid) {
			if u.Update.AvailableCommandsUpdate != nil {
				continue
			}
			replay = append(replay, u)
			if c := u.Update.UserMessageChunk; c != nil {
				users = append(users, c.Content.Text.Text)
			}
		}
		if diff := cmp.Diff([]string{"one", "two", "three"}, users); diff != "" {
			t.Errorf("replayed user chunks (-want +got):\n%s", diff)
		}
		if r, ok := fakeagent.ParseReply(acpclient.AgentText(replay[:2])); !ok || r.Turns != 1 || r.Model != "deep-3" || r.Text != "one" {
			t.Errorf("replayed first reply = %+v, %v", r, ok)
		}
		if r := a.reply(ctx, t, sid, "four"); r.Turns != 3 || r.Model != "smart-2" {
			t.Errorf("reply after load = %+v, want turns 3 on smart-2", r)
		}
		n, err := a.NewSession(ctx, "/home/me")
		if err != nil {
			t.Fatal(err)
		}
		if n.SessionId != "fake-sess-3" {
			t.Errorf("new session id = %s, want fake-sess-3 (no reuse of persisted ids)", n.SessionId)
		}
	})

	t.Run("resume keeps config", func(t *testing.T) {
		// The load above persisted turn 3 and the default config; set
		// deep-3 again in a third life, then resume in a fourth.
		b := start(t, acpclient.Options{}, "-state", state, "-resume", "-load-keeps-config")
		if _, err := b.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Resume(ctx, sid, "/home/me"); err != nil {
			t.Fatalf("resume of a persisted session: %v", err)
		}
		if err := b.SetModel(ctx, sid, "deep-3"); err != nil {
			t.Fatal(err)
		}
		b.cancel()
		b.exitCode(t)

		c := start(t, acpclient.Options{}, "-state", state, "-resume", "-load-keeps-config")
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := c.Resume(ctx, sid, "/home/me")
		if err != nil {
			t.Fatal(err)
		}
		if got := option(res.ConfigOptions, "model").CurrentValue; got != "deep-3" {
			t.Errorf("model after resume with -load-keeps-config = %s, want deep-3", got)
		}
		if len(c.Updates(sid)) != 0 {
			t.Errorf("resume replayed %d updates, want none", len(c.Updates(sid)))
		}
		if r := c.reply(ctx, t, sid, "five"); r.Turns != 4 || r.Model != "deep-3" {
			t.Errorf("reply after resume = %+v, want turns 4 on deep-3", r)
		}
	})

	t.Run("without -state", func(t *testing.T) {
		a := start(t, acpclient.Options{})
		if _, err := a.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Load(ctx, sid, "/home/me"); acpclient.Code(err) != -32002 {
			t.Errorf("load without -state: err = %v, want -32002", err)
		}
	})

	t.Run("bad file", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		a := start(t, acpclient.Options{}, "-state", bad)
		if code := a.exitCode(t); code != 2 {
			t.Errorf("exit status %d with a corrupt -state, want 2", code)
		}
	})
}
