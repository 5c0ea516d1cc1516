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

// Every frame a client gets through the sidecar must read as ACP v1, as an
// editor whose SDK validates what it receives (the TypeScript SDK's zod)
// reads it: the agent's frames the sidecar passed on, and above all the
// ones it made or changed itself (its commands and replies, the legacy
// pickers it builds, the history it replays, its errors). The schema is
// the one the agents' SDK ships, @agentclientprotocol/sdk 2.4.0's
// schema/v1/schema.unstable.json (the stable schema and the drafts today's
// agents send, compaction among them), which scripts/e2e-setup.sh installs
// with claude-agent-acp.

const schemaPath = ".cache/e2e/agentclientprotocol-claude-agent-acp/node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json"

// responseDefs names the schema's result of each client method; a method
// it has none for (an extension's, `_sidecar/*`) is not checked.
var responseDefs = map[string]string{
	"initialize": "InitializeResponse", "authenticate": "AuthenticateResponse",
	"session/new": "NewSessionResponse", "session/load": "LoadSessionResponse",
	"session/resume": "ResumeSessionResponse", "session/fork": "ForkSessionResponse",
	"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
	"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
	"session/set_mode": "SetSessionModeResponse", "session/set_config_option": "SetSessionConfigOptionResponse",
}

// paramsDefs names the schema's params of each agent method a client gets.
var paramsDefs = map[string]string{
	"session/update": "SessionNotification", "session/request_permission": "RequestPermissionRequest",
	"fs/read_text_file": "ReadTextFileRequest", "fs/write_text_file": "WriteTextFileRequest",
}

var acpSchema struct {
	once sync.Once
	defs map[string]*jsonschema.Schema
	err  error
}

// schemaDefs compiles the definitions the checks use, once per test run.
func schemaDefs(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	acpSchema.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			acpSchema.err = err
			return
		}
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(schemaPath)))
		if err != nil {
			acpSchema.err = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			acpSchema.err = err
			return
		}
		c := jsonschema.NewCompiler()
		if acpSchema.err = c.AddResource("acp-v1.json", doc); acpSchema.err != nil {
			return
		}
		acpSchema.defs = map[string]*jsonschema.Schema{}
		names := []string{"Error"}
		for _, m := range []map[string]string{responseDefs, paramsDefs} {
			for _, d := range m {
				names = append(names, d)
			}
		}
		for _, d := range names {
			if acpSchema.defs[d], acpSchema.err = c.Compile("acp-v1.json#/$defs/" + d); acpSchema.err != nil {
				return
			}
		}
	})
	if acpSchema.err != nil {
		t.Fatalf("the ACP schema (%s): %v; run scripts/e2e-setup.sh claude", schemaPath, acpSchema.err)
	}
	return acpSchema.defs
}

// checkSchema validates every frame a's client got against the ACP v1
// schema (schemaErrors).
func checkSchema(t *testing.T, a *agent) {
	t.Helper()
	a.mu.Lock()
	lines := append([]transcriptLine(nil), a.transcript...)
	a.mu.Unlock()
	errs := schemaErrors(schemaDefs(t), lines)
	for i, e := range errs {
		if i == 5 {
			t.Errorf("%d frames in all are not ACP v1", len(errs))
			break
		}
		t.Error(e)
	}
}

// schemaErrors checks each frame a client got in lines against defs, by
// what it is: a response by the method of the request it answers (lines
// have the client's requests too), an error by the schema's Error, an
// agent request or notification by its method. It says what failed.
func schemaErrors(defs map[string]*jsonschema.Schema, lines []transcriptLine) []string {
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
			def, part = paramsDefs[m.Method], m.Params
		case m.Error != nil:
			def, part = "Error", m.Error
		case m.Result != nil:
			def, part = responseDefs[asked[string(m.ID)]], m.Result
		}
		if def == "" {
			continue
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(part))
		if err == nil {
			err = defs[def].Validate(inst)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("a frame the client got is no ACP v1 %s: %s\n%s", def, clip(l.Line, 0), firstLines(err.Error(), 12)))
		}
	}
	return errs
}

// TestSchemaErrors: the check tells a frame of the wrong shape, by the
// method its request had, and passes one of the right shape.
func TestSchemaErrors(t *testing.T) {
	defs := schemaDefs(t)
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
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
