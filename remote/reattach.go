package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// This file is the one place where the bridge speaks ACP rather than
// carrying it: a fresh connection that stands in for one the server could
// not resume is initialized again with the editor's own initialize, and
// each session open on the old one comes back by session/load (v1) or
// session/resume (v2), whose replay the editor already has.

// sessionParams is what opened a session: enough to open it again.
type sessionParams struct {
	SessionID  string          `json:"sessionId,omitempty"`
	Cwd        string          `json:"cwd"`
	McpServers json.RawMessage `json:"mcpServers,omitempty"`
	// ends: the request ends the session (close, delete).
	ends bool
}

// An ownCall is one of the bridge's own requests, and what its answer does.
type ownCall struct {
	session string // the session a reattach opens
	init    bool   // the initialize of a fresh connection that stands in
}

func (c ownCall) answered(b *bridge, msg []byte, env proxy.Envelope) {
	switch {
	case c.init:
		b.noteVersion(msg)
	case c.session != "":
		if env.Error && errorCode(msg) == proxy.CodeLeaseHeld {
			// In a fleet, the host that died still holds the session
			// until its lease runs out: ask again then. The editor's
			// messages keep waiting.
			b.cfg.Log.Info("the session's lease is still another host's; asking again", "session", c.session)
			b.retryLater(c.session)
			return
		}
		delete(b.hushed, c.session)
		b.reattaching--
		if env.Error {
			b.cfg.Log.Error("the server could not reattach a session; the editor's next request on it will fail", "session", c.session, "answer", string(msg))
			delete(b.sessions, c.session)
		}
	}
}

// retryLater asks for sid again after a pause (carry sends it).
func (b *bridge) retryLater(sid string) {
	b.retries = append(b.retries, sid)
	if b.retryTimer == nil {
		b.retryTimer = time.NewTimer(leaseRetry)
	}
}

// leaseRetry is the pause before a reattach refused for a lease is asked
// again: a fraction of a fleet's shortest lease.
const leaseRetry = 500 * time.Millisecond

// reattach asks the server for an open session again, by load (v1) or
// resume (v2), its replay hushed.
func (b *bridge) reattach(ctx context.Context, ws *websocket.Conn, sid string) error {
	p := b.sessions[sid]
	method := "session/load"
	if b.v2 {
		method = "session/resume"
	}
	p.SessionID = sid
	if p.McpServers == nil {
		p.McpServers = json.RawMessage("[]")
	}
	params, err := json.Marshal(p)
	if err != nil {
		return &fatalError{msg: "connect: " + err.Error()}
	}
	id := b.ownID("reattach")
	b.own[id] = ownCall{session: sid}
	b.hushed[sid] = true
	req := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
	return b.send(ctx, ws, req)
}

// errorCode is the code of a JSON-RPC error answer, 0 when it has none.
func errorCode(msg []byte) int {
	var r struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if unmarshal(msg, &r) != nil || r.Error == nil {
		return 0
	}
	return r.Error.Code
}

// fresh opens a new connection on ws: the editor's initialize (its answer
// goes to the editor the first time only), then every open session again.
func (b *bridge) fresh(ctx context.Context, ws *websocket.Conn) error {
	b.cursor, b.unacked, b.ackBase, b.sent = 0, nil, 0, 0
	first := !b.initialized
	line := b.initLine
	if !first {
		var err error
		if line, err = withID(b.initLine, b.ownID("initialize")); err != nil {
			return &fatalError{msg: "connect: the editor's initialize cannot be sent again: " + err.Error()}
		}
	}
	if err := ws.Write(ctx, websocket.MessageText, line); err != nil {
		return err
	}
	_, answer, err := ws.Read(ctx)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if env, err := proxy.Scan(answer); err != nil || env.Kind != proxy.KindResponse || env.Error {
		if first {
			// The editor's own initialize failed: it gets the answer,
			// and there is nothing to carry.
			b.toEditor(answer)
			return &fatalError{msg: "connect: the server refused initialize: " + string(answer)}
		}
		return fmt.Errorf("initialize again: %s", answer)
	}
	b.noteVersion(answer)
	if first {
		b.initialized = true
		b.toEditor(answer)
		return b.flushQueue(ctx, ws)
	}
	// The old connection's requests in flight are lost with it.
	for id := range b.inflight {
		b.toEditor(proxy.ErrorResponse([]byte(id), -32603, "the connection to the ACP server was lost and could not be resumed; the session was opened again from its record"))
	}
	clear(b.inflight)
	clear(b.opening)
	b.retries, b.retryTimer = nil, nil
	for sid := range b.sessions {
		b.reattaching++
		if err := b.reattach(ctx, ws, sid); err != nil {
			return err
		}
	}
	// What the editor sent meanwhile waits for the sessions to be back:
	// a prompt must not overtake its session's load (carry sends it).
	b.cfg.Log.Info("opened a fresh connection", "conn", b.connID, "sessions", len(b.sessions))
	if b.reattaching == 0 {
		return b.flushQueue(ctx, ws)
	}
	return nil
}

// noteVersion reads the protocol version an initialize answer agreed on.
func (b *bridge) noteVersion(answer []byte) {
	var r struct {
		Result struct {
			ProtocolVersion int `json:"protocolVersion"`
		} `json:"result"`
	}
	if unmarshal(answer, &r) == nil {
		b.v2 = r.Result.ProtocolVersion >= 2
	}
}

// noteOpening keeps the params of a request that opens or ends a session.
func (b *bridge) noteOpening(env proxy.Envelope, line []byte) {
	method := string(env.Method)
	switch method {
	case "session/new", "session/load", "session/resume", "session/fork", "session/close", "session/delete":
	default:
		return
	}
	var r struct {
		Params sessionParams `json:"params"`
	}
	if unmarshal(line, &r) != nil {
		return
	}
	r.Params.ends = method == "session/close" || method == "session/delete"
	b.opening[string(env.ID)] = r.Params
}

// noteOpened keeps an opened session, or forgets an ended one, once the
// server said yes.
func (b *bridge) noteOpened(env proxy.Envelope, msg []byte) {
	p, ok := b.opening[string(env.ID)]
	if !ok {
		return
	}
	delete(b.opening, string(env.ID))
	if env.Error {
		return
	}
	if p.ends {
		delete(b.sessions, p.SessionID)
		return
	}
	var r struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if unmarshal(msg, &r) == nil && r.Result.SessionID != "" {
		p.SessionID = r.Result.SessionID
	}
	if p.SessionID != "" {
		b.sessions[p.SessionID] = p
	}
}

// withID is line, a JSON object, with id replaced.
func withID(line []byte, id string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, err
	}
	m["id"] = json.RawMessage(id)
	return json.Marshal(m)
}

func unmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return errors.Join(errors.New("not the JSON expected"), err)
	}
	return nil
}
