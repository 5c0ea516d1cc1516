package fakeagent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// Every frame the fake agent writes in v2 is checked against the ACP v2
// schema that @agentclientprotocol/sdk 2.4.0 ships (schema/v2/schema.json,
// and schema.unstable.json for session/fork, which is unstable in v2), the
// SDK today's agents speak v2 with. scripts/e2e-setup.sh installs it with
// the agents, as it does the v1 schema conformance/e2e checks frames
// against (schema_test.go there).

// v2SchemaDirs are where the schema may be, under the repository root:
// the SDK that codex-acp or claude-agent-acp installed.
func v2SchemaDirs() []string {
	return []string{
		".cache/e2e/agentclientprotocol-codex-acp/node_modules/@agentclientprotocol/sdk/schema/v2",
		".cache/e2e/agentclientprotocol-claude-agent-acp/node_modules/@agentclientprotocol/sdk/schema/v2",
	}
}

// v2Responses names the schema's result of each client method the tests
// send; v2Params the params of each agent method, and of each client
// method (the test's own frames are checked too). "unstable:" defs come
// from schema.unstable.json.
var (
	v2Responses = map[string]string{
		"initialize": "InitializeResponse", "session/new": "NewSessionResponse",
		"session/resume": "ResumeSessionResponse", "session/fork": "unstable:ForkSessionResponse",
		"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
		"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
		"session/set_config_option": "SetSessionConfigOptionResponse",
	}
	v2AgentParams = map[string]string{
		"session/update": "UpdateSessionNotification", "session/request_permission": "RequestPermissionRequest",
	}
	v2ClientParams = map[string]string{
		"initialize": "InitializeRequest", "session/new": "NewSessionRequest",
		"session/resume": "ResumeSessionRequest", "session/fork": "unstable:ForkSessionRequest",
		"session/list": "ListSessionsRequest", "session/close": "CloseSessionRequest",
		"session/delete": "DeleteSessionRequest", "session/prompt": "PromptRequest",
		"session/set_config_option": "SetSessionConfigOptionRequest", "session/cancel": "CancelSessionNotification",
	}
	v2ClientResults = map[string]string{"session/request_permission": "RequestPermissionResponse"}
)

var v2Schema struct {
	once sync.Once
	defs map[string]*jsonschema.Schema
	err  error
}

// v2Defs compiles the definitions the checks use, once per test binary. A
// schema that is not on disk fails the test: the checks are the point.
func v2Defs(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	v2Schema.once.Do(func() { v2Schema.defs, v2Schema.err = compileV2Schema() })
	if v2Schema.err != nil {
		t.Fatalf("the ACP v2 schema: %v; run scripts/e2e-setup.sh codex (or claude), which installs @agentclientprotocol/sdk with its schema/v2", v2Schema.err)
	}
	return v2Schema.defs
}

func compileV2Schema() (map[string]*jsonschema.Schema, error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return nil, err
	}
	var dir string
	for _, d := range v2SchemaDirs() {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(d), "schema.json")); err == nil {
			dir = filepath.Join(root, filepath.FromSlash(d))
			break
		}
	}
	if dir == "" {
		return nil, fmt.Errorf("no schema.json in any of %s under %s: %w", strings.Join(v2SchemaDirs(), ", "), root, fs.ErrNotExist)
	}
	c := jsonschema.NewCompiler()
	for _, name := range []string{"schema.json", "schema.unstable.json"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := c.AddResource(name, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	defs := map[string]*jsonschema.Schema{}
	for _, m := range []map[string]string{v2Responses, v2AgentParams, v2ClientParams, v2ClientResults, {"": "Error"}} {
		for _, d := range m {
			file, def := "schema.json", d
			if rest, ok := strings.CutPrefix(d, "unstable:"); ok {
				file, def = "schema.unstable.json", rest
			}
			s, err := c.Compile(file + "#/$defs/" + def)
			if err != nil {
				return nil, fmt.Errorf("compile %s: %w", d, err)
			}
			defs[d] = s
		}
	}
	return defs, nil
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

// v2SchemaErrors checks each frame of an exchange against the v2 schema,
// by what it is: a response by the method of the request it answers
// (either side's), an error by Error, a request or notification by its
// method. An agent method the schema has no params for (fs/read_text_file,
// say, which v2 has not) is an error; extension methods (`_…`) are not
// checked, as the schema allows them any params.
func v2SchemaErrors(defs map[string]*jsonschema.Schema, wire []v2Wire) []string {
	asked := map[bool]map[string]string{true: {}, false: {}} // by the side that asked: id -> method
	var errs []string
	for _, w := range wire {
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		side := "agent"
		if w.fromClient {
			side = "client"
		}
		if err := json.Unmarshal(w.line, &m); err != nil || m.JSONRPC != "2.0" {
			errs = append(errs, fmt.Sprintf("a frame from the %s is no JSON-RPC 2.0 message (%v): %s", side, err, w.line))
			continue
		}
		var def string
		var part json.RawMessage
		switch {
		case m.Method != "" && m.ID != nil:
			asked[w.fromClient][string(m.ID)] = m.Method
			fallthrough
		case m.Method != "":
			if strings.HasPrefix(m.Method, "_") || w.bad {
				continue
			}
			defs := v2AgentParams
			if w.fromClient {
				defs = v2ClientParams
			}
			if def = defs[m.Method]; def == "" {
				errs = append(errs, fmt.Sprintf("the %s sent %s, a method the test does not know in v2: %s", side, m.Method, w.line))
				continue
			}
			part = m.Params
		case m.Error != nil:
			def, part = "Error", m.Error
		case m.Result != nil:
			method := asked[!w.fromClient][string(m.ID)]
			if w.fromClient {
				def = v2ClientResults[method]
			} else {
				def = v2Responses[method]
			}
			if def == "" {
				if !strings.HasPrefix(method, "_") {
					errs = append(errs, fmt.Sprintf("a result from the %s answers %q, which the test does not know: %s", side, method, w.line))
				}
				continue
			}
			part = m.Result
		default:
			errs = append(errs, fmt.Sprintf("a frame from the %s is neither request, response nor notification: %s", side, w.line))
			continue
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(part))
		if err == nil {
			err = defs[def].Validate(inst)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("a frame from the %s is no ACP v2 %s: %s\n%s", side, def, w.line, clip(err.Error(), 1500)))
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
