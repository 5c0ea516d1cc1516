package fakeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	acp "github.com/coder/acp-go-sdk"
)

// The fake agent speaks ACP v2 (-v2) through an adapter at its stdio edges
// rather than as a second agent. acp-go-sdk v0.13.0, which the fake agent
// is built on, speaks only v1, and every quirk (crashes, lags, double
// answers, -state, the prompt triggers) is written once, in the v1 agent.
// The adapter turns each v2 frame the client sends into the v1 frame the
// SDK understands, or answers it itself where v2 removed a method or v1
// has no words for it, and turns each v1 frame the agent writes into its
// v2 form. So every quirk works in both versions, and a client that asks
// for v1 gets exactly the bytes it got before -v2 existed.
//
//	client ─v2─▶ stdin reader ─ inbound ──v1─▶ SDK ─▶ agent (agent.go, prompt.go)
//	client ◀─v2─ lineWriter ── outbound ◀─v1── SDK, raw writes
//
// The client's initialize decides: under -v2, protocolVersion 2 or more
// makes the connection v2 (the answer says 2, the highest the fake agent
// has); anything else leaves the adapter out of the way. Shapes follow the
// v2 schema of @agentclientprotocol/sdk 2.4.0 (schema/v2/schema.json) and
// what claude-agent-acp 0.101.0 and codex-acp 2.6.0 write (testdata/v2).
// The files:
//
//	v2.go         the adapter, its state and the two edges
//	v2init.go     initialize, both ways
//	v2turn.go     session/prompt: insertion, state_update, message ids
//	v2session.go  the other session methods and their results
//	v2update.go   session/update and session/request_permission

// The JSON-RPC error codes the adapter answers with itself (invalid, in
// catalog.go, has -32602).
const (
	codeMethodNotFound = -32601 // a v1 method v2 removed
	codeInternalError  = -32603 // a frame the adapter failed to build
)

// v2out is how the adapter writes: through the line writer, and so
// through its own outbound rewrite, which leaves v2 lines alone.
type v2out interface {
	// writeRaw writes lines to stdout.
	writeRaw(line []byte)
	// answerRaw answers a client request the adapter handles itself; a
	// notification (no id) gets nothing.
	answerRaw(id, result json.RawMessage, rerr *acp.RequestError)
}

// v2sessions is what the adapter asks of the session store.
type v2sessions interface {
	// turnsOf is the number of turns in session sid's history, or the
	// error any request on an unknown session gets.
	turnsOf(sid string) (int, *acp.RequestError)
}

var (
	_ v2out      = (*lineWriter)(nil)
	_ v2sessions = (*sessionStore)(nil)
)

// v2adapter is the ACP v2 adapter of one agent process, which serves one
// connection. inbound runs on the stdin reader only; outbound runs under
// the line writer's lock, from any goroutine, and so never writes itself.
// Lock order: the writer's lock, then mu; inbound never holds mu while it
// writes.
type v2adapter struct {
	enabled bool // -v2
	// inResult (-commands-in-result): the command list goes in every
	// session result instead of an available_commands_update, as codex-acp
	// 2.6.0 gives it in v2; nil for an update after the result.
	inResult json.RawMessage
	// lateAccept (-late-accept): a prompt's answer comes after its turn's
	// idle, not at its insertion (v2turn.go).
	lateAccept bool
	out        v2out
	sessions   v2sessions
	stderr     io.Writer
	on         atomic.Bool // the client's initialize asked for v2

	mu sync.Mutex
	// reqs are the client's requests in flight whose answer the adapter
	// rewrites, by idKey.
	reqs map[string]v2req
	// prompts are the adapter's own session/prompt requests to the SDK, by
	// idKey, each standing for a v2 prompt already answered.
	prompts map[string]*v2turn
	live    map[string]*v2turn   // the turn in flight on each session
	last    map[string]int       // the last turn number handed out on each session
	replays map[string]*v2replay // the replay of a resume in flight on each session
	own     map[string]int       // ids the adapter made for messages outside turns, per session
	next    int                  // the adapter's last prompt id
}

// v2req is what the answer to a client request needs.
type v2req struct {
	method string // the client's method
	sid    string
	replay bool // a session/resume with replayFrom start
}

// opensSession says whether a client method's result opens a session, and
// so lists the commands under -commands-in-result.
func opensSession(method string) bool {
	switch method {
	case acp.AgentMethodSessionNew, acp.AgentMethodSessionResume, acp.AgentMethodSessionLoad, "session/fork":
		return true
	}
	return false
}

// newV2Adapter is the adapter of an agent; commands is the command list
// to give in session results (-commands-in-result), nil for none.
func newV2Adapter(enabled bool, commands json.RawMessage, out v2out, sessions v2sessions, stderr io.Writer) *v2adapter {
	return &v2adapter{
		enabled:  enabled,
		inResult: commands,
		out:      out,
		sessions: sessions,
		stderr:   stderr,
		reqs:     map[string]v2req{},
		prompts:  map[string]*v2turn{},
		live:     map[string]*v2turn{},
		last:     map[string]int{},
		replays:  map[string]*v2replay{},
		own:      map[string]int{},
	}
}

// active reports whether the connection speaks v2.
func (v *v2adapter) active() bool { return v.on.Load() }

// baseline reports whether a method behind feature is served: always in
// v2, whose session capability makes session/list, session/resume and
// session/close baseline methods (and the adapter sends session/load only
// for a resume that replays).
func (a *agent) baseline(feature bool) bool { return feature || a.v2.active() }

// frame is the line writer's hook: frameLine's bookkeeping on the v1 line
// as the SDK wrote it, then, in v2, the adapter's rewrite of that line and
// of the lines that follow it.
func (a *agent) frame(line []byte) ([]byte, [][]byte, func(error)) {
	out, follow, done := a.frameLine(line)
	if !a.v2.active() {
		return out, follow, done
	}
	if out == nil {
		out = line
	}
	out = a.v2.outbound(out)
	for i, l := range follow {
		follow[i] = a.v2.outbound(l)
	}
	return out, follow, done
}

// inbound is the client's edge: it returns the line to hand the SDK in
// place of line, with its envelope, or nil if it answered or dropped the
// message itself. line and env are returned as they are outside v2.
func (v *v2adapter) inbound(line []byte, env envelope) ([]byte, envelope) {
	if env.Method == acp.AgentMethodInitialize {
		return v.initialize(line, env)
	}
	if !v.active() {
		return line, env
	}
	switch env.Method {
	case acp.AgentMethodSessionLoad, acp.AgentMethodSessionSetMode, acp.AgentMethodSessionSetModel:
		v.removed(env)
		return nil, env
	case acp.AgentMethodSessionSetConfigOption:
		return v.setConfigOption(env)
	case acp.AgentMethodSessionResume:
		return v.resume(env)
	case acp.AgentMethodSessionPrompt:
		return v.prompt(line, env)
	case acp.AgentMethodSessionNew, acp.AgentMethodSessionFork:
		return v.open(env)
	}
	return line, env
}

// v2frame is a JSON-RPC message as outbound reads it.
type v2frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (f v2frame) hasID() bool { return len(f.ID) > 0 && string(f.ID) != "null" }

// outbound is the agent's edge: it returns what to write in place of the
// v1 line (the line itself if v2 has it unchanged, nothing if v2 has no
// such message, or several lines). A line it fails to rewrite is logged and
// written as it is, as a proxy forwards what it cannot rewrite.
func (v *v2adapter) outbound(line []byte) []byte {
	var f v2frame
	if json.Unmarshal(line, &f) != nil {
		return line
	}
	switch {
	case f.Method == acp.ClientMethodSessionUpdate && !f.hasID():
		return v.update(line, f.Params)
	case f.Method == acp.ClientMethodSessionRequestPermission && f.hasID():
		return v.permission(line, f)
	case f.Method == "" && f.hasID():
		return v.response(line, f)
	}
	return line
}

// response rewrites the answer to a client request: the end of a prompt
// turn (v2turn.go), or a result whose v2 shape differs.
func (v *v2adapter) response(line []byte, f v2frame) []byte {
	key := idKey(f.ID)
	v.mu.Lock()
	if t := v.prompts[key]; t != nil {
		out := v.endTurnLocked(t, f)
		v.mu.Unlock()
		return out
	}
	r, ok := v.reqs[key]
	delete(v.reqs, key)
	state := "idle"
	if ok && r.method == acp.AgentMethodSessionResume {
		delete(v.replays, r.sid)
		if v.live[r.sid] != nil {
			state = "running"
		}
	}
	v.mu.Unlock()
	if !ok || f.Error != nil {
		return line
	}
	var res json.RawMessage
	var err error
	if r.method == acp.AgentMethodInitialize {
		res, err = v2InitializeResult(f.Result)
	} else {
		res, err = v2SessionResult(f.Result)
		if err == nil && v.inResult != nil && opensSession(r.method) {
			res, err = editObject(res, func(m map[string]json.RawMessage) error {
				m["availableCommands"] = v.inResult
				return nil
			})
		}
	}
	if err != nil {
		fmt.Fprintf(v.stderr, "fakeagent: v2 %s result: %v; written as v1\n", r.method, err)
		return line
	}
	out := resultLine(f.ID, res)
	if r.method == acp.AgentMethodSessionResume {
		// The schema's StateUpdate: "Resume MUST send a current-state
		// snapshot after any replay and before its response."
		out = append(stateLine(r.sid, state, "", nil), out...)
	}
	return out
}

// editObject decodes the JSON object raw, lets edit change its members and
// encodes it again. Members edit leaves alone keep their bytes; the
// members come out sorted, as the SDK writes them.
func editObject(raw json.RawMessage, edit func(map[string]json.RawMessage) error) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("null where an object belongs")
	}
	if err := edit(m); err != nil {
		return nil, err
	}
	return marshal(m)
}

// resultLine is the response line carrying result, with its newline.
func resultLine(id, result json.RawMessage) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + string(result) + "}\n")
}

// messageLine is the JSON-RPC message line of method with id (none if
// nil) and params, with its newline: a request or a notification.
func messageLine(id json.RawMessage, method string, params json.RawMessage) []byte {
	line := `{"jsonrpc":"2.0",`
	if len(id) > 0 {
		line += `"id":` + string(id) + `,`
	}
	line += `"method":` + jsonString(method)
	if len(params) > 0 {
		line += `,"params":` + string(params)
	}
	return []byte(line + "}\n")
}
