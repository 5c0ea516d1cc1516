//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every frame a client gets through the sidecar must read as the ACP
// version the connection speaks, as an editor whose SDK validates what it
// receives (the TypeScript SDK's zod) reads it: the agent's frames the
// sidecar passed on, and above all the ones it made or changed itself (its
// commands and replies, the legacy pickers it builds, the history it
// replays, its errors). The schemas are the ones the agents' SDK ships,
// @agentclientprotocol/sdk 2.4.0's schema/v1/schema.unstable.json and
// schema/v2/schema.unstable.json (the stable schema and the drafts today's
// agents send, compaction and fork among them), which scripts/e2e-setup.sh
// installs with claude-agent-acp. The version is the one the initialize
// result the client got names.

const schemaDir = ".cache/e2e/agentclientprotocol-claude-agent-acp/node_modules/@agentclientprotocol/sdk/schema/"

// An acpVersion is one version's schema, and the definitions its checks
// use: the result of each client method (a method it has none for, an
// extension's, `_sidecar/*`, is not checked) and the params of each agent
// method a client gets.
type acpVersion struct {
	file                     string
	responseDefs, paramsDefs map[string]string
}

var acpVersions = map[int]acpVersion{
	1: {file: "v1/schema.unstable.json",
		responseDefs: map[string]string{
			"initialize": "InitializeResponse", "authenticate": "AuthenticateResponse",
			"session/new": "NewSessionResponse", "session/load": "LoadSessionResponse",
			"session/resume": "ResumeSessionResponse", "session/fork": "ForkSessionResponse",
			"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
			"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
			"session/set_mode": "SetSessionModeResponse", "session/set_config_option": "SetSessionConfigOptionResponse",
		},
		paramsDefs: map[string]string{
			"session/update": "SessionNotification", "session/request_permission": "RequestPermissionRequest",
			"fs/read_text_file": "ReadTextFileRequest", "fs/write_text_file": "WriteTextFileRequest",
		}},
	// v2 has no session/load, set_mode, authenticate or client fs methods.
	2: {file: "v2/schema.unstable.json",
		responseDefs: map[string]string{
			"initialize":  "InitializeResponse",
			"session/new": "NewSessionResponse", "session/resume": "ResumeSessionResponse", "session/fork": "ForkSessionResponse",
			"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
			"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
			"session/set_config_option": "SetSessionConfigOptionResponse",
		},
		paramsDefs: map[string]string{
			"session/update": "UpdateSessionNotification", "session/request_permission": "RequestPermissionRequest",
		}},
}

// compiledSchema is one version's compiled definitions, by name.
type compiledSchema struct {
	acpVersion
	defs map[string]*jsonschema.Schema
}

var acpSchemas struct {
	mu  sync.Mutex
	got map[int]*compiledSchema
}

// schemaDefs compiles the definitions of version v the checks use, once
// per test run.
func schemaDefs(t *testing.T, v int) *compiledSchema {
	t.Helper()
	acpSchemas.mu.Lock()
	defer acpSchemas.mu.Unlock()
	if c := acpSchemas.got[v]; c != nil {
		return c
	}
	ver, ok := acpVersions[v]
	if !ok {
		t.Fatalf("the client was told ACP version %d, which has no schema here", v)
	}
	c, err := compileSchema(ver)
	if err != nil {
		t.Fatalf("the ACP v%d schema (%s): %v; run scripts/e2e-setup.sh claude", v, schemaDir+ver.file, err)
	}
	if acpSchemas.got == nil {
		acpSchemas.got = map[int]*compiledSchema{}
	}
	acpSchemas.got[v] = c
	return c
}

func compileSchema(ver acpVersion) (*compiledSchema, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(schemaDir+ver.file)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("acp.json", doc); err != nil {
		return nil, err
	}
	out := &compiledSchema{acpVersion: ver, defs: map[string]*jsonschema.Schema{}}
	names := []string{"Error"}
	for _, m := range []map[string]string{ver.responseDefs, ver.paramsDefs} {
		for _, d := range m {
			names = append(names, d)
		}
	}
	for _, d := range names {
		if out.defs[d], err = c.Compile("acp.json#/$defs/" + d); err != nil {
			return nil, err
		}
	}
	return out, nil
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

// schemaErrors checks each frame a client got in lines against defs, by
// what it is: a response by the method of the request it answers (lines
// have the client's requests too), an error by the schema's Error, an
// agent request or notification by its method. It says what failed.
func schemaErrors(sc *compiledSchema, lines []transcriptLine) []string {
	asked := map[string]string{} // the client's request id -> method
	var errs []string
	for _, l := range lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(l.Line), &m) != nil {
			continue // not JSON: a hostile test's line, or the agent's garbage
		}
		if l.Out {
			if m.Method != "" && m.ID != nil {
				asked[string(m.ID)] = m.Method
			}
			continue
		}
		var def string
		var part json.RawMessage
		switch {
		case m.Method != "":
			def, part = sc.paramsDefs[m.Method], m.Params
		case m.Error != nil:
			def, part = "Error", m.Error
		case m.Result != nil:
			def, part = sc.responseDefs[asked[string(m.ID)]], m.Result
		}
		if def == "" {
			continue
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(part))
		if err == nil {
			err = sc.defs[def].Validate(inst)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("a frame the client got is no ACP %s %s: %s\n%s", sc.file, def, clip(l.Line, 0), firstLines(err.Error(), 12)))
		}
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
