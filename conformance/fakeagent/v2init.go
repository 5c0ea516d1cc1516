package fakeagent

import (
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"
)

// v2ProtocolVersion is the highest ACP version the fake agent speaks: the
// answer to a client that asks for 2 or more (the schema's
// InitializeResponse: "the highest protocol version supported by the agent
// that is at or below the version requested").
const v2ProtocolVersion = 2

// v2ClientCapabilities are the members of a v2 client's capabilities that
// are handed to the SDK as v1 clientCapabilities. v2's ClientCapabilities
// has only auth and elicitation, which the fake agent uses neither of; a
// client that still sends v1's fs and terminal, or the v1 draft's
// subagents (read raw by subagentsAdvertised), gets them honoured.
func v2ClientCapabilities() []string { return []string{"fs", "terminal", "subagents", "_meta"} }

// initialize decides the connection's version from the client's
// initialize. Under -v2 a request for protocolVersion 2 or more turns on
// the adapter and reaches the SDK as v1: {protocolVersion: 1, clientInfo:
// info, clientCapabilities: what of capabilities maps}. Otherwise the line
// goes on as it came, and the adapter is off.
func (v *v2adapter) initialize(line []byte, env envelope) ([]byte, envelope) {
	if !v.enabled {
		return line, env
	}
	var p struct {
		ProtocolVersion json.RawMessage            `json:"protocolVersion"`
		Info            json.RawMessage            `json:"info"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		Meta            json.RawMessage            `json:"_meta"`
	}
	var version int
	if json.Unmarshal(env.Params, &p) != nil || json.Unmarshal(p.ProtocolVersion, &version) != nil || version < v2ProtocolVersion {
		v.on.Store(false) // the SDK answers it as v1 (or answers its error)
		return line, env
	}
	v.on.Store(true)
	caps := map[string]json.RawMessage{}
	for _, k := range v2ClientCapabilities() {
		if c, ok := p.Capabilities[k]; ok {
			caps[k] = c
		}
	}
	v1 := map[string]any{"protocolVersion": acp.ProtocolVersionNumber, "clientCapabilities": caps}
	if len(p.Info) > 0 {
		v1["clientInfo"] = p.Info
	}
	if len(p.Meta) > 0 {
		v1["_meta"] = p.Meta
	}
	if env.hasID() {
		v.mu.Lock()
		v.reqs[idKey(env.ID)] = v2req{method: env.Method}
		v.mu.Unlock()
	}
	return v.request(env, env.Method, v1)
}

// v2InitializeResult is the v2 InitializeResponse for the SDK's v1 one:
// agentInfo becomes info, and agentCapabilities become capabilities.session
// as the schema's SessionCapabilities names them. v2 writes a capability
// as {} where v1 wrote true; session/list, session/resume and session/close
// are baseline in v2 and have no key; session/load and loadSession are
// gone; stdio MCP, baseline in v1, is a capability in v2. fork is a key of
// the unstable schema (SessionForkCapabilities), which the agents in
// testdata/v2 advertise too. _meta stays where it was.
func v2InitializeResult(result json.RawMessage) (json.RawMessage, error) {
	var r struct {
		AgentCapabilities struct {
			PromptCapabilities struct {
				Image           bool `json:"image"`
				Audio           bool `json:"audio"`
				EmbeddedContext bool `json:"embeddedContext"`
			} `json:"promptCapabilities"`
			McpCapabilities struct {
				HTTP bool `json:"http"`
			} `json:"mcpCapabilities"`
			SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
			Meta                json.RawMessage            `json:"_meta"`
		} `json:"agentCapabilities"`
		AgentInfo   json.RawMessage `json:"agentInfo"`
		AuthMethods json.RawMessage `json:"authMethods"`
		Meta        json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, err
	}
	if len(r.AgentInfo) == 0 || string(r.AgentInfo) == "null" {
		return nil, fmt.Errorf("no agentInfo for v2's required info")
	}
	type flag struct{}
	type promptCaps struct {
		Image           *flag `json:"image,omitempty"`
		Audio           *flag `json:"audio,omitempty"`
		EmbeddedContext *flag `json:"embeddedContext,omitempty"`
	}
	type mcpCaps struct {
		Stdio flag  `json:"stdio"`
		HTTP  *flag `json:"http,omitempty"`
	}
	type sessionCaps struct {
		Prompt *promptCaps `json:"prompt,omitempty"`
		Mcp    mcpCaps     `json:"mcp"`
		Delete *flag       `json:"delete,omitempty"`
		Fork   *flag       `json:"fork,omitempty"`
	}
	on := func(b bool) *flag {
		if b {
			return &flag{}
		}
		return nil
	}
	has := func(k string) bool {
		c, ok := r.AgentCapabilities.SessionCapabilities[k]
		return ok && string(c) != "null"
	}
	pc := r.AgentCapabilities.PromptCapabilities
	session := sessionCaps{
		Mcp:    mcpCaps{HTTP: on(r.AgentCapabilities.McpCapabilities.HTTP)},
		Delete: on(has("delete")),
		Fork:   on(has("fork")),
	}
	if pc.Image || pc.Audio || pc.EmbeddedContext {
		session.Prompt = &promptCaps{Image: on(pc.Image), Audio: on(pc.Audio), EmbeddedContext: on(pc.EmbeddedContext)}
	}
	type capabilities struct {
		Session sessionCaps     `json:"session"`
		Meta    json.RawMessage `json:"_meta,omitempty"`
	}
	return marshal(struct {
		ProtocolVersion int             `json:"protocolVersion"`
		Info            json.RawMessage `json:"info"`
		Capabilities    capabilities    `json:"capabilities"`
		AuthMethods     json.RawMessage `json:"authMethods,omitempty"`
		Meta            json.RawMessage `json:"_meta,omitempty"`
	}{v2ProtocolVersion, r.AgentInfo, capabilities{session, r.AgentCapabilities.Meta}, r.AuthMethods, r.Meta})
}
