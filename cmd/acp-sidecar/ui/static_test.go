package ui

import (
	"net/http"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// The page's CSS and script come from the binary, by name alone, and the
// pages name them with a version so a new binary's are not an old cache's.
func TestStatic(t *testing.T) {
	s := newTestServer(t, state.NewMemory())
	for path, wantType := range map[string]string{"/static/ui.css": "text/css", "/static/live.js": "text/javascript"} {
		w := get(t, s, path)
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), wantType) || w.Body.Len() == 0 {
			t.Errorf("%s: %d %q, %d bytes", path, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
	}
	for _, path := range []string{"/static/", "/static/nope.js", "/static/../server.go"} {
		if w := get(t, s, path); w.Code == http.StatusOK {
			t.Errorf("%s: %d, want no file", path, w.Code)
		}
	}
	page := body(t, get(t, s, "/"))
	if !strings.Contains(page, `<script src="/static/live.js?v=`+s.assetV+`" defer></script>`) {
		t.Errorf("the page does not load the versioned script:\n%s", page)
	}
}
