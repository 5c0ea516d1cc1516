package acpschema_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// schema is ACP version v's schema from where scripts/e2e-setup.sh
// installs it. It skips the test when the SDK is not installed, and fails
// it instead when CI=true.
func schema(t *testing.T, v int, opts ...acpschema.Option) *acpschema.Schema {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acpschema.CacheDir(root); err != nil {
		testbin.Missing(t, fmt.Sprintf("%v; run scripts/e2e-setup.sh claude", err))
	}
	s, err := acpschema.LoadCache(root, v, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// verdict is what Frame said of one frame, in short: the definition, then
// "ok", "invalid" or the sentinel it wrapped; "-" alone for a frame no
// definition applies to and nothing was said of.
func verdict(def string, err error) string {
	switch {
	case def == "" && err == nil:
		return "-"
	case errors.Is(err, acpschema.ErrUnknown):
		return strings.TrimSpace(def + " unknown")
	case errors.Is(err, acpschema.ErrNotJSONRPC):
		return strings.TrimSpace(def + " not-jsonrpc")
	case err != nil:
		return def + " invalid"
	}
	return def + " ok"
}

const (
	initV2     = `>{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"e","version":"0"},"capabilities":{}}}`
	prompt     = `>{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`
	v1Result   = `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
	v2Result   = `{"jsonrpc":"2.0","id":1,"result":{"messageId":"m1"}}`
	permission = `{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s1","title":"Run ls?","options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}`
	allowed    = `>{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}`
	status     = `>{"jsonrpc":"2.0","id":7,"method":"_sidecar/status","params":{"sessionId":"s1"}}`
	statusAns  = `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"anything"}}`
	readFile   = `{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/x"}}`
	planGone   = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan_removed"}}}`
	fork       = `>{"jsonrpc":"2.0","id":4,"method":"session/fork","params":{"sessionId":"s1","cwd":"/"}}`
	forked     = `{"jsonrpc":"2.0","id":4,"result":{"sessionId":"s2"}}`
)

// TestJudge: one row per rule of what a frame is judged by.
func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		name    string
		version int
		stable  bool
		strict  bool
		frames  []string // ">" first: the client's
		want    []string // verdict of each frame
	}{
		{"a result by the method of the request it answers", 2, false, false,
			[]string{initV2, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"0"},"capabilities":{"session":{}}}}`, prompt, v2Result},
			[]string{"InitializeRequest ok", "InitializeResponse ok", "PromptRequest ok", "PromptResponse ok"}},
		{"a v1 prompt result in v2", 2, false, false, []string{prompt, v1Result}, []string{"PromptRequest ok", "PromptResponse invalid"}},
		{"a v2 prompt result in v1", 1, false, false, []string{prompt, v2Result}, []string{"PromptRequest ok", "PromptResponse invalid"}},
		{"v1 frames in v1", 1, false, false, []string{prompt, v1Result}, []string{"PromptRequest ok", "PromptResponse ok"}},
		// The two sides' ids are their own: the client's answer to the
		// agent's request 1 is no answer to the client's request 1.
		{"each side's ids", 2, false, false, []string{prompt, permission, allowed, v2Result},
			[]string{"PromptRequest ok", "RequestPermissionRequest ok", "RequestPermissionResponse ok", "PromptResponse ok"}},
		{"an error by Error, from either side", 2, false, false,
			[]string{`{"jsonrpc":"2.0","id":9,"error":{"code":"oops","message":"x"}}`, `>{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"Method not found"}}`},
			[]string{"Error invalid", "Error ok"}},
		{"params left out are null", 2, false, false, []string{`{"jsonrpc":"2.0","method":"session/update"}`}, []string{"UpdateSessionNotification invalid"}},
		{"an extension's method and its answer", 2, false, true, []string{status, statusAns}, []string{"-", "-"}},
		{"a method the version has not, leniently", 2, false, false, []string{readFile}, []string{"-"}},
		{"a method the version has not, strictly", 2, false, true, []string{readFile}, []string{"unknown"}},
		{"a method of the other side's", 2, false, true, []string{`>` + permission}, []string{"unknown"}},
		{"a result to a method the version has not", 2, false, true,
			[]string{`>{"jsonrpc":"2.0","id":5,"method":"session/load","params":{}}`, `{"jsonrpc":"2.0","id":5,"result":{}}`}, []string{"unknown", "unknown"}},
		{"a result to no request", 2, false, true, []string{v2Result}, []string{"unknown"}},
		{"not JSON, leniently", 2, false, false, []string{`{"jsonrpc":"2.0",`}, []string{"-"}},
		{"not JSON, strictly", 2, false, true, []string{`{"jsonrpc":"2.0",`}, []string{"not-jsonrpc"}},
		{"neither request, response nor notification", 2, false, true, []string{`{"jsonrpc":"2.0","id":1}`}, []string{"not-jsonrpc"}},
		{"no jsonrpc 2.0, strictly", 2, false, true, []string{`{"jsonrpc":"1.0","id":1,"error":{"code":1,"message":"x"}}`}, []string{"not-jsonrpc"}},
		{"no jsonrpc 2.0, leniently", 2, false, false, []string{`{"jsonrpc":2,"id":1,"error":{"code":1,"message":"x"}}`}, []string{"Error ok"}},
		// The stable schema takes an update kind it has not for an
		// extension's; the unstable one has plan_removed, with a planId.
		{"an unstable update, by the unstable schema", 2, false, false, []string{planGone}, []string{"UpdateSessionNotification invalid"}},
		{"an unstable update, by the stable schema", 2, true, false, []string{planGone}, []string{"UpdateSessionNotification ok"}},
		{"fork, which only the unstable schema has, with Stable", 2, true, true, []string{fork, forked}, []string{"ForkSessionRequest ok", "ForkSessionResponse ok"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var opts []acpschema.Option
			if tt.stable {
				opts = append(opts, acpschema.Stable())
			}
			j := &acpschema.Judge{Schema: schema(t, tt.version, opts...), Strict: tt.strict}
			var got []string
			for _, f := range tt.frames {
				from := proxy.AgentToClient
				if rest, ok := strings.CutPrefix(f, ">"); ok {
					from, f = proxy.ClientToAgent, rest
				}
				got = append(got, verdict(j.Frame(from, []byte(f))))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verdicts mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDetail: the validator's words without the schema's name for itself.
func TestDetail(t *testing.T) {
	j := &acpschema.Judge{Schema: schema(t, 2)}
	def, err := j.Frame(proxy.AgentToClient, []byte(`{"jsonrpc":"2.0","id":2,"error":{"code":"oops","message":"x"}}`))
	if def != "Error" || err == nil {
		t.Fatalf("Frame = %q, %v; want Error and a validation error", def, err)
	}
	if got := acpschema.Detail(err); strings.Contains(got, "acp.json") || strings.Contains(got, "validation failed with") || !strings.Contains(got, "at '/code'") {
		t.Errorf("Detail = %q, want the finding at /code alone", got)
	}
}

// ExampleJudge judges a v2 connection's frames. It has no Output to check,
// as it needs the SDK scripts/e2e-setup.sh installs; it prints
//
//	client: PromptRequest valid true
//	agent: PromptResponse valid false
func ExampleJudge() {
	root, err := testbin.RepoRoot()
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := acpschema.LoadCache(root, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	j := &acpschema.Judge{Schema: s}
	for _, f := range []struct {
		from  proxy.Direction
		frame string
	}{
		{proxy.ClientToAgent, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`},
		{proxy.AgentToClient, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`}, // a v1 result
	} {
		def, err := j.Frame(f.from, []byte(f.frame))
		fmt.Printf("%s: %s valid %t\n", f.from, def, err == nil)
	}
}
