//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Every frame a client gets through the sidecar must read as the ACP
// version the connection speaks (conformance/acpschema says why): the
// agent's frames the sidecar passed on, and above all the ones it made or
// changed itself (its commands and replies, the legacy pickers it builds,
// the history it replays, its errors). The schemas are the ones the
// agents' SDK ships, @agentclientprotocol/sdk 2.4.0's
// schema/v1/schema.unstable.json and schema/v2/schema.unstable.json (the
// stable schema and the drafts today's agents send, compaction and fork
// among them), which scripts/e2e-setup.sh installs with claude-agent-acp.
// The version is the one the initialize result the client got names.

// schemaDefs is the schema of ACP version v, compiled once per test binary
// (acpschema.LoadCache).
func schemaDefs(t *testing.T, v int) *acpschema.Schema {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s, err := acpschema.LoadCache(root, v)
	if err != nil {
		t.Fatalf("the ACP v%d schema the client was told: %v", v, err)
	}
	return s
}

// checkSchema validates every frame a's client got against the schema of
// the ACP version its initialize result named (schemaErrors).
func checkSchema(t *testing.T, a *agent) {
	t.Helper()
	a.mu.Lock()
	lines := append([]transcriptLine(nil), a.transcript...)
	a.mu.Unlock()
	v := spokenVersion(lines)
	errs := schemaErrors(schemaDefs(t, v), lines)
	for i, e := range errs {
		if i == 5 {
			t.Errorf("%d frames in all are not ACP v%d", len(errs), v)
			break
		}
		t.Error(e)
	}
}

// spokenVersion is the protocolVersion of the first initialize result the
// client got in lines; 1 when it got none.
func spokenVersion(lines []transcriptLine) int {
	asked := map[string]bool{}
	for _, l := range lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result struct {
				ProtocolVersion int `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(l.Line), &m) != nil {
			continue
		}
		switch {
		case l.Out && m.Method == "initialize":
			asked[string(m.ID)] = true
		case !l.Out && m.Method == "" && asked[string(m.ID)] && m.Result.ProtocolVersion > 0:
			return m.Result.ProtocolVersion
		}
	}
	return 1
}

// schemaErrors checks each frame a client got in lines against sc, by what
// it is (acpschema.Judge; lines have the client's requests too, which the
// responses are judged by). It says what failed.
func schemaErrors(sc *acpschema.Schema, lines []transcriptLine) []string {
	j := &acpschema.Judge{Schema: sc}
	var errs []string
	for _, l := range lines {
		from := proxy.AgentToClient
		if l.Out {
			from = proxy.ClientToAgent
		}
		def, err := j.Frame(from, []byte(l.Line))
		if from == proxy.ClientToAgent || def == "" || err == nil {
			continue
		}
		errs = append(errs, fmt.Sprintf("a frame the client got is no ACP %s %s: %s\n%s", sc.File, def, clip(l.Line, 0), firstLines(err.Error(), 12)))
	}
	return errs
}

// TestSchemaErrors: the check tells a frame of the wrong shape, by the
// method its request had, and passes one of the right shape.
func TestSchemaErrors(t *testing.T) {
	defs := schemaDefs(t, 1)
	lines := func(in ...string) []transcriptLine {
		var out []transcriptLine
		for _, l := range in {
			out = append(out, transcriptLine{Out: strings.HasPrefix(l, ">"), Line: strings.TrimPrefix(l, ">")})
		}
		return out
	}
	good := lines(`>{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found"}}`)
	if errs := schemaErrors(defs, good); len(errs) != 0 {
		t.Errorf("good frames: %q", errs)
	}
	for _, bad := range [][]transcriptLine{
		lines(`>{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":5}}`),
		lines(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text"}}}}`),
		lines(`{"jsonrpc":"2.0","id":2,"error":{"code":"oops","message":"x"}}`),
		lines(`>{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}}`, `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"finished"}}`),
	} {
		if errs := schemaErrors(defs, bad); len(errs) != 1 {
			t.Errorf("%s: %d errors, want 1", bad[len(bad)-1].Line, len(errs))
		}
	}
	// In v2 a v1 prompt result and a v1 option are wrong; v2's are right,
	// and the version is the one the initialize result named.
	v2 := lines(`>{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"e","version":"0"},"capabilities":{}}}`,
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"0"},"capabilities":{"session":{}}}}`,
		`>{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"messageId":"m1"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}`)
	if v := spokenVersion(v2); v != 2 {
		t.Fatalf("spokenVersion = %d, want 2", v)
	}
	if errs := schemaErrors(schemaDefs(t, 2), v2); len(errs) != 0 {
		t.Errorf("good v2 frames: %q", errs)
	}
	bad := append(v2[:2:2], lines(`>{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)...)
	if errs := schemaErrors(schemaDefs(t, 2), bad); len(errs) != 1 {
		t.Errorf("a v1 prompt result in v2: %d errors, want 1", len(errs))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
