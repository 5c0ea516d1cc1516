package fakeagent_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

var uuidShape = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// chunkIDs lists the messageId of every agent_message_chunk in us ("" for
// none).
func chunkIDs(us []acp.SessionNotification) []string {
	var out []string
	for _, u := range us {
		if c := u.Update.AgentMessageChunk; c != nil {
			id := ""
			if c.MessageId != nil {
				id = *c.MessageId
			}
			out = append(out, id)
		}
	}
	return out
}

// TestMessageIDs: under -message-ids every agent_message_chunk of a turn
// carries that turn's MessageID, a new one each turn, and a load replays
// each turn's message under the id it had.
func TestMessageIDs(t *testing.T) {
	a := start(t, acpclient.Options{}, "-message-ids")
	s, ctx := a.session(t)
	sid := s.SessionId
	a.reply(ctx, t, sid, "one")
	a.reply(ctx, t, sid, "stream 2 4") // the reply and two more chunks
	one, two := fakeagent.MessageID(string(sid), 1), fakeagent.MessageID(string(sid), 2)
	if one == two || !uuidShape.MatchString(one) || !uuidShape.MatchString(two) {
		t.Fatalf("MessageID turn 1 = %q, turn 2 = %q: want two different UUID-shaped ids", one, two)
	}
	want := []string{one, one, two, two, two, two}
	if diff := cmp.Diff(want, chunkIDs(a.Updates(sid))); diff != "" {
		t.Errorf("messageIds (-want +got):\n%s", diff)
	}
	mark := len(a.Updates(sid))
	if _, err := a.Load(ctx, sid, "/home/me"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{one, two}, chunkIDs(a.Updates(sid)[mark:])); diff != "" {
		t.Errorf("replayed messageIds (-want +got):\n%s", diff)
	}
	other, err := a.NewSession(ctx, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if fakeagent.MessageID(string(other.SessionId), 1) == one {
		t.Error("two sessions share the messageId of their first turn")
	}

	t.Run("off", func(t *testing.T) {
		a := start(t, acpclient.Options{})
		s, ctx := a.session(t)
		a.reply(ctx, t, s.SessionId, "one")
		for _, l := range a.Lines() {
			if bytes.Contains(l, []byte(`"messageId"`)) {
				t.Errorf("messageId without -message-ids: %s", l)
			}
		}
	})
}

// TestInfoUpdates: under -info-updates a turn that ends with end_turn ends
// with session_info_update and usage_update, before its response; the fake
// clock and the cost advance by turn; session/list reports the same
// updatedAt.
func TestInfoUpdates(t *testing.T) {
	a := start(t, acpclient.Options{}, "-info-updates", "-list")
	s, ctx := a.session(t)
	sid := s.SessionId
	for turn, text := range []string{"hello world", "second"} {
		a.reply(ctx, t, sid, text)
		us := a.Updates(sid)
		if len(us) < 2 {
			t.Fatalf("turn %d: %d updates", turn+1, len(us))
		}
		info, usage := us[len(us)-2].Update.SessionInfoUpdate, us[len(us)-1].Update.UsageUpdate
		if info == nil || usage == nil {
			t.Fatalf("turn %d: last updates %v, want session_info_update then usage_update", turn+1, kinds(us[len(us)-2:]))
		}
		wantAt := []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}[turn]
		if info.Title == nil || *info.Title != "hello world" || info.UpdatedAt == nil || *info.UpdatedAt != wantAt {
			t.Errorf("turn %d: session_info_update = %+v, want title %q, updatedAt %s", turn+1, info, "hello world", wantAt)
		}
		wantUsage := acp.SessionUsageUpdate{SessionUpdate: "usage_update", Used: 1000 * (turn + 1), Size: 200000,
			Cost: &acp.Cost{Amount: 0.25 * float64(turn+1), Currency: "USD"}}
		if diff := cmp.Diff(wantUsage, *usage); diff != "" {
			t.Errorf("turn %d: usage_update (-want +got):\n%s", turn+1, diff)
		}
	}
	l, err := a.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 1 || l.Sessions[0].UpdatedAt == nil || *l.Sessions[0].UpdatedAt != "2026-01-01T00:02:00Z" {
		t.Errorf("list = %+v, want updatedAt 2026-01-01T00:02:00Z", l.Sessions)
	}
	// The cost goes out as a plain JSON number.
	if _, err := a.WaitLine(ctx, func(l []byte) bool {
		return bytes.Contains(l, []byte(`"cost":{"amount":0.5,"currency":"USD"}`))
	}); err != nil {
		t.Error(err)
	}

	t.Run("off", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-list")
		s, ctx := a.session(t)
		a.reply(ctx, t, s.SessionId, "hello")
		for _, u := range a.Updates(s.SessionId) {
			if u.Update.SessionInfoUpdate != nil || u.Update.UsageUpdate != nil {
				t.Errorf("info update without -info-updates: %v", kinds([]acp.SessionNotification{u}))
			}
		}
		l, err := a.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if l.Sessions[0].UpdatedAt != nil {
			t.Errorf("list updatedAt = %s without -info-updates", *l.Sessions[0].UpdatedAt)
		}
	})
}

// TestAuthNotice: under -auth-notice the line right after the initialize
// response is AuthStatusLine, a notification with no session id.
func TestAuthNotice(t *testing.T) {
	a := start(t, acpclient.Options{}, "-auth-notice")
	ctx := t.Context()
	if _, err := a.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	want := bytes.TrimSuffix(fakeagent.AuthStatusLine(), []byte("\n"))
	if _, err := a.WaitLine(ctx, func(l []byte) bool { return bytes.Equal(l, want) }); err != nil {
		t.Fatal(err)
	}
	lines := a.Lines()
	if len(lines) != 2 || !bytes.Contains(lines[0], []byte(`"protocolVersion"`)) || !bytes.Equal(lines[1], want) {
		t.Errorf("lines = %q, want the initialize response, then %s", lines, want)
	}
	n := a.Notifications()
	if len(n) != 1 || n[0].Method != "_auth/status_update" {
		t.Fatalf("notifications = %+v", n)
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(n[0].Params, &params); err != nil {
		t.Fatal(err)
	}
	if sid, ok := params["sessionId"]; ok {
		t.Errorf("_auth/status_update has sessionId %s", sid)
	}

	t.Run("off", func(t *testing.T) {
		a := start(t, acpclient.Options{})
		a.session(t) // the notice would come before the session/new response
		if n := a.Notifications(); len(n) != 0 {
			t.Errorf("notifications without -auth-notice: %+v", n)
		}
	})
}
