package wire

import (
	"encoding/json"
	"testing"
)

// TestForkAtInCreationMeta: the sidecar's fork point joins a session's
// creation _meta without touching the client's bytes, and a client's fork
// point leaves the _meta its fork keeps.
func TestForkAtInCreationMeta(t *testing.T) {
	for _, tc := range []struct {
		name, meta, without string
	}{
		{"no fork point", `{"systemPrompt":{"append":"<b>&"}}`, `{"systemPrompt":{"append":"<b>&"}}`},
		{"fork point alone", `{"jetbrains":{"air":{"fork":{"version":1,"messageId":"m1"}}}}`, ``},
		{"fork point beside the client's", `{"a":1, "jetbrains":{"air":{"fork":{"version":1,"messageId":"m1"},"x":2}},"b":"<&>"}`, `{"a":1, "jetbrains":{"air":{"x":2}},"b":"<&>"}`},
		{"fork point beside other jetbrains keys", `{"jetbrains":{"air":{"fork":{"version":1,"messageId":"m1"}},"y":3}}`, `{"jetbrains":{"y":3}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(WithoutForkAt(json.RawMessage(tc.meta))); got != tc.without {
				t.Errorf("WithoutForkAt(%s) = %s, want %s", tc.meta, got, tc.without)
			}
		})
	}
	for _, tc := range []struct {
		name, meta, want string
	}{
		{"no _meta", ``, `{"jetbrains":{"air":{"fork":{"messageId":"m9","version":1}}}}`},
		{"the client's", `{"systemPrompt":{"append":"<b>&"}}`, `{"systemPrompt":{"append":"<b>&"},"jetbrains":{"air":{"fork":{"messageId":"m9","version":1}}}}`},
		{"an old fork point", `{"jetbrains":{"air":{"fork":{"version":1,"messageId":"m1"}}}}`, `{"jetbrains":{"air":{"fork":{"messageId":"m9","version":1}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WithForkAt(json.RawMessage(tc.meta), "m9")
			if string(got) != tc.want {
				t.Errorf("WithForkAt(%s) = %s, want %s", tc.meta, got, tc.want)
			}
			if at := ForkAtOf(json.RawMessage(`{"_meta":` + string(got) + `}`)); at != "m9" {
				t.Errorf("ForkAtOf(WithForkAt(%s)) = %q, want m9", tc.meta, at)
			}
		})
	}
}
