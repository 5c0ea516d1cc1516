//go:build linux

package suite

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// sdkSchema returns the schema dir of @agentclientprotocol/sdk that
// scripts/e2e-setup.sh installs (acpschema.CacheDir), for --schema. It
// skips the test when the SDK is not installed, and fails it instead when
// CI=true.
func sdkSchema(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := acpschema.CacheDir(root)
	if err != nil {
		testbin.Missing(t, fmt.Sprintf("the ACP SDK's schema is not installed: %v", err))
	}
	return dir
}

// inV2 makes a real agent's run speak ACP v2, every frame validated
// against the SDK's v2 schema.
func inV2(t *testing.T) func(*config) {
	dir := sdkSchema(t)
	return func(cfg *config) {
		sc, err := acpschema.Load(dir, protoV2)
		if err != nil {
			t.Fatal(err)
		}
		cfg.protocol, cfg.schema = protoV2, newSchemaLog(sc)
	}
}

// TestClaudeCurrentAgentV2 and TestCodexAgentV2 run the suite on today's
// packages in ACP v2 (docs/v2.md), as TestClaudeCurrentAgent and
// TestCodexAgent run it in v1: no check may fail for the sidecar, and no
// frame a client gets may be outside the v2 schema. codex keeps running
// after stdin EOF in v2 as in v1 (advisory).
func TestClaudeCurrentAgentV2(t *testing.T) {
	runRealAgent(t, "@agentclientprotocol/claude-agent-acp 0.101.0", claudeCurrentEntry, "claude", func(url, _ string) []string { return claudeEnv(os.Environ(), url) }, nil, inV2(t))
}

func TestCodexAgentV2(t *testing.T) {
	runRealAgent(t, "@agentclientprotocol/codex-acp 2.6.0", codexEntry, "codex", codexSetup, map[string]expect{
		"eof": {Warn, "kept running"},
	}, inV2(t))
}

// TestProtocol2OnV1Agent: an agent that answers a v2 initialize with
// protocolVersion 1 is not tested in v1 under --protocol 2: the run stops
// at the probe and says why.
func TestProtocol2OnV1Agent(t *testing.T) {
	bin := sidecarBinary(t)
	var stdout, stderr bytes.Buffer
	args := []string{"--protocol", "2", "--only", "initialize", "--transcripts", filepath.Join(t.TempDir(), "transcripts"), "--", bin, "fakeagent"}
	code := Main(t.Context(), bin, args, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "asked for ACP v2 and was answered protocolVersion 1: the peer does not speak v2") {
		t.Errorf("status %d, stderr %q; want 1 and the agent named as not speaking v2\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
}

// TestSchemaViolations: the validator judges a frame by what it answers,
// in the run's version. A v1 prompt result in a v2 run is wrong, and so
// is a v1 option (id, not configId); their v2 forms are right, and a frame
// of a method the schema does not know (the sidecar's own) is not judged.
func TestSchemaViolations(t *testing.T) {
	dir := sdkSchema(t)
	v2, err := acpschema.Load(dir, protoV2)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := acpschema.Load(dir, protoV1)
	if err != nil {
		t.Fatal(err)
	}
	events := func(lines ...string) []event {
		var out []event
		for _, l := range lines {
			if sent, ok := strings.CutPrefix(l, ">"); ok {
				out = append(out, event{Dir: "send", Frame: []byte(sent)})
			} else {
				out = append(out, event{Dir: "recv", Frame: []byte(l)})
			}
		}
		return out
	}
	const (
		prompt   = `>{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`
		v1Result = `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`
		v2Result = `{"jsonrpc":"2.0","id":3,"result":{"messageId":"m1"}}`
		newReq   = `>{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`
		v1Opt    = `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1","configOptions":[{"id":"model","name":"Model","type":"select","currentValue":"a","options":[{"value":"a","name":"A"}]}]}}`
		v2Opt    = `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1","configOptions":[{"configId":"model","name":"Model","type":"select","currentValue":"a","options":[{"value":"a","name":"A"}]}]}}`
		idle     = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}`
		status   = `>{"jsonrpc":"2.0","id":4,"method":"_sidecar/status","params":{"sessionId":"s1"}}`
		own      = `{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`
	)
	for _, tc := range []struct {
		name   string
		s      *acpschema.Schema
		lines  []string
		judged int
		bad    []string // the definitions that fail, in order
	}{
		{"v2 frames in v2", v2, []string{newReq, v2Opt, prompt, v2Result, idle, status, own}, 3, nil},
		{"a v1 prompt result in v2", v2, []string{prompt, v1Result}, 1, []string{"PromptResponse"}},
		{"a v1 option in v2", v2, []string{newReq, v1Opt}, 1, []string{"NewSessionResponse"}},
		{"v1 frames in v1", v1, []string{newReq, v1Opt, prompt, v1Result}, 2, nil},
		{"a v2 prompt result in v1", v1, []string{prompt, v2Result}, 1, []string{"PromptResponse"}},
		{"an error that is none", v2, []string{`{"jsonrpc":"2.0","id":9,"error":{"code":"oops","message":"x"}}`}, 1, []string{"Error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, vs := judgeRun(tc.s, events(tc.lines...))
			var bad []string
			for _, v := range vs {
				bad = append(bad, v.def)
			}
			if n != tc.judged || strings.Join(bad, ",") != strings.Join(tc.bad, ",") {
				t.Errorf("judged %d frames, failed %q, want %d and %q; violations: %+v", n, bad, tc.judged, tc.bad, vs)
			}
		})
	}
}

// TestSchemaCheckBlames: the schema check's verdict says whose a violation
// is. A frame the sidecar wrote fails the check as the sidecar's; one the
// agent wrote (directly, or passed on as it was) as the agent's; a frame
// the sidecar rewrote with the fault the agent's own frames have stays
// the agent's.
func TestSchemaCheckBlames(t *testing.T) {
	sc, err := acpschema.Load(sdkSchema(t), protoV2)
	if err != nil {
		t.Fatal(err)
	}
	bad := violation{check: "cancel", run: "sidecar-1", def: "PromptResponse", frame: []byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`),
		err: "at '': missing property 'messageId'"}
	for _, tc := range []struct {
		name  string
		found []violation
		want  string // a piece of the verdict's detail; "" for a pass
	}{
		{"none", nil, ""},
		{"the sidecar's", []violation{{check: bad.check, run: bad.run, def: bad.def, frame: bad.frame, err: bad.err, sidecar: true}}, "the sidecar's: frames the sidecar wrote or changed are not valid ACP v2 (v2/schema.unstable.json) (1 frame, one fault): PromptResponse (cancel, sidecar-1)"},
		{"the agent's", []violation{bad}, "the agent's own: frames the agent sent (directly, or passed on unchanged by the sidecar) are not valid ACP v2 (v2/schema.unstable.json) (1 frame, one fault)"},
		{"the agent's, rewritten", []violation{bad, {check: "load", run: "sidecar-1", def: bad.def, frame: bad.frame, err: "at '': missing property 'messageId'", sidecar: true}}, "(2 frames, one fault)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newSchemaLog(sc)
			l.direct, l.viaRun, l.frames, l.found = 1, 1, 10, tc.found
			cfg := &config{schema: l, transcripts: t.TempDir()}
			r := &checkRun{cfg: cfg, id: "schema"}
			err := checkSchema(t.Context(), r, probeResult{})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("verdict %v, want a pass", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("verdict %v, want a failure with %q", err, tc.want)
			}
			if r.transcript == "" {
				t.Error("no transcript")
			}
		})
	}
}
