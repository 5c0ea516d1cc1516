package fakeagent

import (
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"
)

// The session methods in v2 (v2.go). session/list, session/close,
// session/delete and session/cancel have v1's shape and pass as they are;
// the ones below differ.

// removed answers a v1 method that v2 removed (session/load, gone for
// session/resume with replayFrom; session/set_mode and session/set_model,
// gone for configOptions) as claude-agent-acp 0.101.0 answers them in v2,
// member for member (testdata/v2/claude-agent-acp-0.101.0-config.txt).
func (v *v2adapter) removed(env envelope) {
	v.out.answerRaw(env.ID, nil, &acp.RequestError{Code: codeMethodNotFound,
		Message: `"Method not found": ` + env.Method, Data: map[string]any{"method": env.Method}})
}

// request is the SDK's line for the client's request env, as method with
// params.
func (v *v2adapter) request(env envelope, method string, params any) ([]byte, envelope) {
	b, err := marshal(params)
	if err != nil { // params are maps of raw JSON the client sent
		fmt.Fprintf(v.stderr, "fakeagent: v2 %s params: %v\n", env.Method, err)
		v.out.answerRaw(env.ID, nil, &acp.RequestError{Code: codeInternalError, Message: "Internal error: " + err.Error()})
		return nil, env
	}
	var id json.RawMessage
	if env.hasID() {
		id = env.ID
	}
	return messageLine(id, method, b), envelope{ID: env.ID, Method: method, Params: b}
}

// params decodes the object params of env, or answers -32602 and returns
// nil.
func (v *v2adapter) params(env envelope) map[string]json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(env.Params, &p) != nil || p == nil {
		v.out.answerRaw(env.ID, nil, invalid("params", string(env.Params), env.Method+" needs an object"))
		return nil
	}
	return p
}

// expect marks the client's request env as one whose answer the adapter
// rewrites.
func (v *v2adapter) expect(env envelope, r v2req) {
	if !env.hasID() {
		return
	}
	r.method = env.Method
	v.mu.Lock()
	v.reqs[idKey(env.ID)] = r
	v.mu.Unlock()
}

// noMCP hands the SDK an empty mcpServers: the fake agent runs none, v2
// lets a client leave the list out where v1 requires it, and v2's server
// shapes need not parse as v1's. The call log keeps what the client sent.
func noMCP(p map[string]json.RawMessage) { p["mcpServers"] = json.RawMessage(`[]`) }

// open is session/new and session/fork, whose results lose v1's modes and
// models and rename the options' id (v2SessionResult).
func (v *v2adapter) open(env envelope) ([]byte, envelope) {
	p := v.params(env)
	if p == nil {
		return nil, env
	}
	noMCP(p)
	v.expect(env, v2req{sid: sessionIDOf(env.Params)})
	return v.request(env, env.Method, p)
}

// setConfigOption turns v2's {sessionId, configId, type, value} into v1's:
// type "id" is v1's value-id form, which has no type member (the SDK reads
// a request with a type as the boolean form, and then a string value
// fails); type "boolean" is v1's boolean form as it is. Any other type, or
// none, is answered -32602, as the schema has no third form the fake agent
// knows.
func (v *v2adapter) setConfigOption(env envelope) ([]byte, envelope) {
	p := v.params(env)
	if p == nil {
		return nil, env
	}
	var typ string
	_ = json.Unmarshal(p["type"], &typ) // absent or not a string: "", refused below
	switch typ {
	case "id":
		delete(p, "type")
	case "boolean":
	default:
		v.out.answerRaw(env.ID, nil, invalid("type", typ, `session/set_config_option needs type "id" or "boolean"`))
		return nil, env
	}
	v.expect(env, v2req{sid: sessionIDOf(env.Params)})
	return v.request(env, env.Method, p)
}

// resume is v2's session/resume, a baseline method (the agent serves it
// whatever -resume says). Without replayFrom it is v1's session/resume,
// resume notes included. With replayFrom {type: "start"} it is v1's
// session/load, whose replay the adapter reshapes (v2update.go), so every
// quirk of load applies: -load-fails, -fresh-load-fails, -load-lag,
// -die-mid-load, -load-keeps-config. A session the agent does not have
// gets load's -32002. Any other replayFrom is answered -32602.
func (v *v2adapter) resume(env envelope) ([]byte, envelope) {
	p := v.params(env)
	if p == nil {
		return nil, env
	}
	method, replay := acp.AgentMethodSessionResume, false
	if raw, ok := p["replayFrom"]; ok && string(raw) != "null" {
		var from struct {
			Type *string `json:"type"`
		}
		if json.Unmarshal(raw, &from) != nil || from.Type == nil || *from.Type != "start" {
			v.out.answerRaw(env.ID, nil, invalid("replayFrom", string(raw), `the fake agent replays only from {"type":"start"}`))
			return nil, env
		}
		method, replay = acp.AgentMethodSessionLoad, true
	}
	delete(p, "replayFrom")
	noMCP(p)
	sid := sessionIDOf(env.Params)
	v.expect(env, v2req{sid: sid, replay: replay})
	if replay && env.hasID() {
		v.mu.Lock()
		v.replays[sid] = &v2replay{}
		v.mu.Unlock()
	}
	return v.request(env, method, p)
}

// v2SessionResult is a v2 session result for the SDK's v1 one: modes and
// models are gone (v2 has configOptions only), and so is every option's
// id, now configId (v2Options).
func v2SessionResult(result json.RawMessage) (json.RawMessage, error) {
	return editObject(result, func(m map[string]json.RawMessage) error {
		delete(m, "modes")
		delete(m, "models")
		return v2OptionsIn(m)
	})
}

// v2OptionsIn renames the id of every entry of m's configOptions, if m has
// any, to configId, as v2's SessionConfigOption calls it.
func v2OptionsIn(m map[string]json.RawMessage) error {
	raw, ok := m["configOptions"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var opts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &opts); err != nil {
		return fmt.Errorf("configOptions: %w", err)
	}
	for _, o := range opts {
		if id, ok := o["id"]; ok {
			o["configId"] = id
			delete(o, "id")
		}
	}
	b, err := marshal(opts)
	if err != nil {
		return fmt.Errorf("configOptions: %w", err)
	}
	m["configOptions"] = b
	return nil
}
