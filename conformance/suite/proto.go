package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// The suite's client speaks ACP v1 or ACP v2 (--protocol; docs/v2.md).
// Everything the client does differently in the two versions is here, and
// the checks call it and read the same in both:
//
//	                       v1                                v2
//	initialize             {protocolVersion: 1, clientInfo,  {protocolVersion: 2, info, capabilities};
//	                       clientCapabilities}               an answer in another version is an error
//	its result             agentInfo, agentCapabilities      info, capabilities: session.list, resume
//	                                                         and close are baseline when session is there
//	a config option        named by id                       named by configId
//	setting one            {sessionId, configId, value}      {sessionId, configId, type: "id", value}
//	a prompt's end         its response {stopReason}         the session's idle state_update after the
//	                                                         prompt's {messageId} response
//	a failed turn          an error response                 an error response before insertion, else
//	                                                         idle with stopReason error and its error
//	reopen with history    session/load                      session/resume with replayFrom {type: start}
//
// The updates a client reads (chunks, and v2's whole user_message and
// agent_message upserts) are read the same in both (messages), since a
// v1 peer sends no upserts.

// Versions the client speaks.
const (
	protoV1 = 1
	protoV2 = 2
)

// clientInfo is the suite's name as an initialize gives it.
const clientInfo = `{"name":"acp-sidecar-conformance","version":"1"}`

// dialect is the ACP version a conn speaks, and what the client writes
// and reads differently in it. It is a value, fixed for the conn's life.
type dialect struct {
	proto int    // the ACP version the client speaks: 1 or 2
	peer  string // the conn's name, for errors
}

// initParams are the params of the initialize request every check sends,
// in d's version; meta, when not empty, is their _meta. A v1 client
// advertises no fs or terminal, which v2 no longer has.
func (d dialect) initParams(meta string) json.RawMessage {
	s := `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false},"clientInfo":` + clientInfo
	if d.proto >= protoV2 {
		s = `{"protocolVersion":2,"info":` + clientInfo + `,"capabilities":{}`
	}
	if meta != "" {
		s += `,"_meta":` + meta
	}
	return json.RawMessage(s + "}")
}

// initialize sends initialize in c's version and returns the result (see
// answeredVersion).
func (c *conn) initialize(ctx context.Context) (json.RawMessage, error) {
	res, err := c.call(ctx, "initialize", c.dialect.initParams(""))
	if err != nil {
		return res, err
	}
	return res, c.dialect.answeredVersion(res)
}

// answeredVersion checks that an initialize result of a v2 client names
// v2: a peer that answers v1 does not speak v2, and a run that went on in
// v1 would test v1 under --protocol 2 without saying so. A v1 client's
// result is left to the initialize check, as it always was.
func (d dialect) answeredVersion(res json.RawMessage) error {
	if d.proto < protoV2 {
		return nil
	}
	var r struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
	}
	_ = json.Unmarshal(res, &r) // a result that is no object names no version, below
	if string(r.ProtocolVersion) != strconv.Itoa(d.proto) {
		return fmt.Errorf("%s: initialize: the client asked for ACP v%d and was answered protocolVersion %s: the peer does not speak v%d (drop --protocol %d to check it in v1)",
			d.peer, d.proto, orMissing(r.ProtocolVersion), d.proto, d.proto)
	}
	return nil
}

// initResult is what the checks read of an initialize result, in either
// version.
type initResult struct {
	version int
	info    json.RawMessage // agentInfo (v1), info (v2); nil if none
	caps    json.RawMessage // agentCapabilities (v1), capabilities (v2), as the agent sent them; {} if none
	can     agentCaps
}

// readInit reads an initialize result in d's version.
func (d dialect) readInit(res json.RawMessage) (initResult, error) {
	var ir initResult
	var r struct {
		ProtocolVersion int             `json:"protocolVersion"`
		AgentInfo       json.RawMessage `json:"agentInfo"`
		AgentCaps       json.RawMessage `json:"agentCapabilities"`
		Info            json.RawMessage `json:"info"`
		Caps            json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return ir, fmt.Errorf("initialize result: %w", err)
	}
	ir.version, ir.info, ir.caps = r.ProtocolVersion, r.AgentInfo, r.AgentCaps
	if d.proto >= protoV2 {
		ir.info, ir.caps = r.Info, r.Caps
	}
	if isNull(ir.caps) {
		ir.caps = json.RawMessage("{}")
	}
	if d.proto < protoV2 {
		if err := json.Unmarshal(ir.caps, &ir.can); err != nil {
			return ir, fmt.Errorf("initialize result: agentCapabilities: %w", err)
		}
		return ir, nil
	}
	var v2 struct {
		Session map[string]json.RawMessage `json:"session"`
	}
	if err := json.Unmarshal(ir.caps, &v2); err != nil {
		return ir, fmt.Errorf("initialize result: capabilities: %w", err)
	}
	ir.can.proto = protoV2
	if v2.Session != nil {
		// session: {} is the baseline: new, list, resume (with replayFrom
		// too), close, prompt, cancel. Its members add the rest.
		ir.can.SessionCapabilities = maps.Clone(v2.Session)
		for _, k := range []string{"list", "resume", "close"} {
			ir.can.SessionCapabilities[k] = json.RawMessage("{}")
		}
	}
	return ir, nil
}

// sessionCapName is how c's version names session capability name where
// the agent advertises it.
func sessionCapName(proto int, name string) string {
	if proto >= protoV2 {
		return "capabilities.session." + name
	}
	return "sessionCapabilities." + name
}

// capsKey is the member of an initialize result that holds the agent's
// capabilities, and sessionCapsKey the member of those that holds its
// session capabilities: agentCapabilities.sessionCapabilities in v1,
// capabilities.session in v2.
func capsKey(proto int) string {
	if proto >= protoV2 {
		return "capabilities"
	}
	return "agentCapabilities"
}

func sessionCapsKey(proto int) string {
	if proto >= protoV2 {
		return "session"
	}
	return "sessionCapabilities"
}

// optionKey is the member that names a config option: id in v1, configId
// in v2.
func (d dialect) optionKey() string {
	if d.proto >= protoV2 {
		return "configId"
	}
	return "id"
}

// setOption sets the select option id of sid to v.
func (c *conn) setOption(ctx context.Context, sid, id, v string) (json.RawMessage, error) {
	p := map[string]any{"sessionId": sid, "configId": id, "value": v}
	if c.dialect.proto >= protoV2 {
		p["type"] = "id" // v2 says which of a value's forms it is
	}
	return c.call(ctx, "session/set_config_option", p)
}

// reopen is one way a client opens a session that exists.
type reopen struct {
	name   string // as a detail says it
	method string
	replay bool // the session's history is replayed
}

// plainResume reopens a session without its history: session/resume in
// both versions.
var plainResume = reopen{name: "session/resume", method: "session/resume"}

// withHistory reopens a session with its history replayed: v1's
// session/load, v2's session/resume with replayFrom {type: "start"}.
func (d dialect) withHistory() reopen {
	if d.proto >= protoV2 {
		return reopen{name: "session/resume with replayFrom", method: "session/resume", replay: true}
	}
	return reopen{name: "session/load", method: "session/load", replay: true}
}

// reopen opens sid in cwd the way how says.
func (c *conn) reopen(ctx context.Context, how reopen, sid, cwd string) (json.RawMessage, error) {
	p := reopenParams(sid, cwd)
	if how.replay && c.dialect.proto >= protoV2 {
		p["replayFrom"] = map[string]string{"type": "start"}
	}
	return c.call(ctx, how.method, p)
}

// A turn is one session/prompt from its request to its end: in v1 the
// prompt's response, which carries the stopReason; in v2 the session's
// idle state_update that follows the prompt's {messageId} response. An
// idle that comes before that response (a resume's snapshot while the
// prompt waited out a rebuild) ends nothing of this prompt's. The conn
// ends turns as it reads the lines (promptAnswered, turnUpdate), in
// their order. A session has one turn at a time, as a client sends them.
type turn struct {
	c    *conn
	sid  string
	done chan struct{} // closed at the turn's end, once stop and err are set
	// accepted: the v2 prompt was answered with its messageId.
	accepted bool
	stop     string
	err      error
}

// startTurn writes the session/prompt request line (id and line from
// c.request) for sid and returns its turn.
func (c *conn) startTurn(sid, id string, line []byte) (*turn, error) {
	t := &turn{c: c, sid: sid, done: make(chan struct{})}
	if _, err := c.send("session/prompt", id, line, t); err != nil {
		return nil, err
	}
	return t, nil
}

// promptLine runs the prompt request line to the end of its turn and
// returns its stopReason.
func (c *conn) promptLine(ctx context.Context, sid, id string, line []byte) (string, error) {
	t, err := c.startTurn(sid, id, line)
	if err != nil {
		return "", err
	}
	return t.wait(ctx)
}

// ended reports whether the turn is over. It never blocks, and may be
// called under c.mu (an await predicate).
func (t *turn) ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// wait waits for the turn's end and returns its stopReason. A JSON-RPC
// error answer, or in v2 a turn that ended with stopReason error, is an
// error that errCode reads the code of.
func (t *turn) wait(ctx context.Context) (string, error) {
	c := t.c
	select {
	case <-t.done:
		return t.stop, t.err
	case <-ctx.Done():
		return "", fmt.Errorf("%s: session/prompt: %s: %w%s", c.name, t.missing(), context.Cause(ctx), c.stderrHint())
	case <-c.done:
		if t.ended() { // the end was among the last lines
			return t.stop, t.err
		}
		return "", fmt.Errorf("%s: session/prompt: the peer's output ended before %s%s", c.name, strings.TrimPrefix(t.missing(), "no "), c.stderrHint())
	}
}

// missing says what the turn still waits for.
func (t *turn) missing() string {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.accepted {
		return "no idle state_update ended the turn"
	}
	return "no response"
}

// finish ends t. Under c.mu.
func (t *turn) finish(stop string, err error) {
	if t.ended() {
		return
	}
	t.stop, t.err = stop, err
	close(t.done)
}

// promptAnswered takes in the response e to t's prompt. Under c.mu.
func (c *conn) promptAnswered(t *turn, e envelope) {
	if e.Error != nil {
		t.finish("", fmt.Errorf("%s: session/prompt: %w", c.name, e.Error))
		return
	}
	var r struct {
		StopReason string `json:"stopReason"`
		MessageID  string `json:"messageId"`
	}
	_ = json.Unmarshal(e.Result, &r) // v1: a result without one has stop ""
	if c.dialect.proto < protoV2 {
		t.finish(r.StopReason, nil)
		return
	}
	if r.MessageID == "" {
		t.finish("", fmt.Errorf("%s: session/prompt: answered %s, want {messageId} (a v2 prompt's turn ends with an idle state_update)", c.name, oneLine(string(e.Result), 200)))
		return
	}
	t.accepted = true
	c.accepted[t.sid] = t
}

// turnUpdate ends the accepted v2 turn of a session whose idle
// state_update params carry. Under c.mu.
func (c *conn) turnUpdate(params json.RawMessage) {
	if len(c.accepted) == 0 {
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Kind       string    `json:"sessionUpdate"`
			State      string    `json:"state"`
			StopReason string    `json:"stopReason"`
			Error      *rpcError `json:"error"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &p) != nil || p.Update.Kind != "state_update" || p.Update.State != "idle" {
		return
	}
	t := c.accepted[p.SessionID]
	if t == nil {
		return
	}
	delete(c.accepted, p.SessionID)
	if p.Update.StopReason == "error" {
		re := p.Update.Error
		if re == nil {
			re = &rpcError{Message: "stopReason error without an error object"}
		}
		t.finish("error", fmt.Errorf("%s: session/prompt: the turn ended with stopReason error: %w", c.name, re))
		return
	}
	t.finish(p.Update.StopReason, nil)
}
