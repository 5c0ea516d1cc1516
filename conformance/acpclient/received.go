package acpclient

import (
	"context"
	"encoding/json"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// received is what the peer sent, kept for the test to read back and wait
// on: every line exactly, and decoded, in arrival order, the session/update
// notifications, the other notifications and the permission requests. The
// Client's reader records each line before it handles the next (record),
// so a call that returns has seen every update sent before its response;
// the SDK's handler records the requests it answers (note, permission).
type received struct {
	b       board // guards every field below
	lines   [][]byte
	updates []acp.SessionNotification
	notes   []Message
	perms   []acp.RequestPermissionRequest
}

func newReceived() *received { return &received{b: newBoard()} }

// record keeps one line the peer wrote, and decodes it if it is a
// session/update or another notification (not $/…), which it reports as
// kept: those are the client's alone and never reach the SDK.
func (r *received) record(line []byte, p peek, parsed bool) (kept bool) {
	r.b.update(func() {
		r.lines = append(r.lines, line)
		if !parsed {
			return
		}
		switch {
		case p.Method == acp.ClientMethodSessionUpdate && !p.hasID():
			var n acp.SessionNotification
			if json.Unmarshal(p.Params, &n) == nil {
				r.updates = append(r.updates, n)
			}
			kept = true
		case p.Method != "" && !p.hasID() && !strings.HasPrefix(p.Method, "$/"):
			r.notes = append(r.notes, Message{Method: p.Method, Params: p.Params})
			kept = true
		}
	})
	return kept
}

// note keeps an extension request the SDK answered.
func (r *received) note(m Message) {
	r.b.update(func() { r.notes = append(r.notes, m) })
}

// permission keeps a session/request_permission request the SDK answered.
func (r *received) permission(p acp.RequestPermissionRequest) {
	r.b.update(func() { r.perms = append(r.perms, p) })
}

// end wakes every waiter for good: the peer's output has ended.
func (r *received) end() { r.b.end() }

// Updates returns the session/update notifications received for sid, in
// order. An update kind the SDK does not know decodes lossily; Lines has
// the exact bytes.
func (r *received) Updates(sid acp.SessionId) []acp.SessionNotification {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.updatesLocked(sid)
}

func (r *received) updatesLocked(sid acp.SessionId) []acp.SessionNotification {
	var out []acp.SessionNotification
	for _, u := range r.updates {
		if u.SessionId == sid {
			out = append(out, u)
		}
	}
	return out
}

// AllUpdates returns every session/update received, in order.
func (r *received) AllUpdates() []acp.SessionNotification {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return append([]acp.SessionNotification(nil), r.updates...)
}

// WaitUpdates blocks until pred holds for sid's updates, ctx ends or the
// peer's output ends, and returns the updates pred last saw. pred runs
// under the client's lock and must not call the client.
func (r *received) WaitUpdates(ctx context.Context, sid acp.SessionId, pred func([]acp.SessionNotification) bool) ([]acp.SessionNotification, error) {
	var seen []acp.SessionNotification
	err := r.b.wait(ctx, "updates of "+string(sid), func() bool {
		seen = r.updatesLocked(sid)
		return pred(seen)
	})
	return seen, err
}

// Lines returns every line the peer wrote, exactly, without the newline.
func (r *received) Lines() [][]byte {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return append([][]byte(nil), r.lines...)
}

// WaitLine blocks until a line matching pred has arrived (checking earlier
// lines too) and returns the first such line.
func (r *received) WaitLine(ctx context.Context, pred func([]byte) bool) ([]byte, error) {
	return r.b.waitLine(ctx, &r.lines, pred)
}

// Notifications returns the peer's notifications other than session/update
// and $/…, in order.
func (r *received) Notifications() []Message {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return append([]Message(nil), r.notes...)
}

// Permissions returns the session/request_permission requests answered.
func (r *received) Permissions() []acp.RequestPermissionRequest {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return append([]acp.RequestPermissionRequest(nil), r.perms...)
}
