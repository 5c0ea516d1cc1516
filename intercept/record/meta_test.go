package record

import (
	"encoding/json"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
)

// TestCreationMeta: which _meta a session keeps after each request that
// makes or opens it (state.Session.Meta).
func TestCreationMeta(t *testing.T) {
	const (
		client = `{"systemPrompt":{"append":"<b>&"}}`
		had    = `{"old":true}`
		parent = `{"parent":1}`
	)
	for _, tc := range []struct {
		method, sent, want string
	}{
		{wire.SessionNew, client, client},
		{wire.SessionNew, ``, ``},
		{wire.SessionNew, `null`, ``},
		{wire.SessionLoad, client, client},
		{wire.SessionLoad, ``, had},
		{wire.SessionResume, ``, had},
		{wire.SessionResume, client, client},
		{wire.SessionFork, ``, parent},
		{wire.SessionFork, `{"jetbrains":{"air":{"fork":{"version":1,"messageId":"m"}}}}`, parent},
		{wire.SessionFork, `{"jetbrains":{"air":{"fork":{"version":1,"messageId":"m"}}},"k":"<&>"}`, `{"k":"<&>"}`},
	} {
		got := creationMeta(tc.method, json.RawMessage(tc.sent), json.RawMessage(had), json.RawMessage(parent))
		if string(got) != tc.want {
			t.Errorf("%s with _meta %q: keeps %q, want %q", tc.method, tc.sent, got, tc.want)
		}
	}
}
