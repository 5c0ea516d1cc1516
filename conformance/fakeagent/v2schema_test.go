package fakeagent_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Every frame the fake agent writes in v2 is checked against the ACP v2
// schema that @agentclientprotocol/sdk 2.4.0 ships, the SDK today's agents
// speak v2 with, and so is every frame the tests' client writes: stable v2
// (schema/v2/schema.json), and schema.unstable.json for session/fork, which
// is unstable in v2 (acpschema.Stable). scripts/e2e-setup.sh installs it
// with the agents, as it does the v1 schema conformance/e2e checks frames
// against.

// v2Defs is the v2 schema, compiled once per test binary. A schema that is
// not on disk fails the test: the checks are the point.
func v2Defs(t *testing.T) *acpschema.Schema {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s, err := acpschema.LoadCache(root, 2, acpschema.Stable())
	if err != nil {
		t.Fatalf("the ACP v2 schema: %v", err)
	}
	return s
}

// v2Wire is one line of a v2 exchange, as either side wrote it.
type v2Wire struct {
	fromClient bool
	line       []byte
	// bad marks a client frame that is not v2 on purpose (a removed
	// method, a set_config_option without type): its params are not
	// checked.
	bad bool
}

// v2SchemaErrors checks each frame of an exchange, either side's, against
// the v2 schema by what it is (acpschema.Judge), strictly: a frame that is
// no JSON-RPC 2.0 message is an error, and so is a method the schema has
// no params for from that side (fs/read_text_file from the agent, say,
// which v2 has not) or a result to one; extension methods (`_…`) are not
// checked, as the schema allows them any params.
func v2SchemaErrors(s *acpschema.Schema, wire []v2Wire) []string {
	j := &acpschema.Judge{Schema: s, Strict: true}
	var errs []string
	for _, w := range wire {
		from := proxy.AgentToClient
		if w.fromClient {
			from = proxy.ClientToAgent
		}
		def, err := j.Frame(from, w.line) // a bad frame too, for the request its answer is judged by
		switch {
		case err == nil || w.bad:
		case def == "":
			errs = append(errs, fmt.Sprintf("a frame from the %s is not one the test knows in v2 (%v): %s", from, err, w.line))
		default:
			errs = append(errs, fmt.Sprintf("a frame from the %s is no ACP v2 %s: %s\n%s", from, def, w.line, clip(err.Error(), 1500)))
		}
	}
	return errs
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// TestV2SchemaErrors: the check passes frames of the right shape and tells
// each wrong one, by the method of the request a result answers.
func TestV2SchemaErrors(t *testing.T) {
	defs := v2Defs(t)
	wire := func(in ...string) []v2Wire {
		var out []v2Wire
		for _, l := range in {
			out = append(out, v2Wire{fromClient: strings.HasPrefix(l, ">"), line: []byte(strings.TrimPrefix(l, ">"))})
		}
		return out
	}
	good := wire(`>{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message","messageId":"m1","content":[{"type":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"messageId":"m1"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}`)
	if errs := v2SchemaErrors(defs, good); len(errs) != 0 {
		t.Errorf("good frames: %q", errs)
	}
	for _, bad := range [][]v2Wire{
		wire(`>{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`),
		wire(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`),
		wire(`>{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/"}}`, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1","configOptions":[{"id":"mode","name":"Mode","type":"select","currentValue":"a","options":[{"value":"a","name":"A"}]}]}}`),
		wire(`{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/x"}}`),
	} {
		if errs := v2SchemaErrors(defs, bad); len(errs) != 1 {
			t.Errorf("%s: %d errors, want 1: %q", bad[len(bad)-1].line, len(errs), errs)
		}
	}
}
