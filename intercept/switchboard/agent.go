package switchboard

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// The agents' side: what each agent's relay writes to the client, through
// its slot's Egress.

// agentFrame decides what the client sees of one agent frame; nil is
// nothing.
func (sw *Switchboard) agentFrame(ctx context.Context, sl *slot, f *proxy.Frame) []byte {
	env, line := &f.Env, f.Raw
	switch env.Kind {
	case proxy.KindResponse:
		req, ok := sw.answers.sent(env.ID)
		if ok && !sw.answers.agents(env.ID) {
			// The agent's chain held it to one answer already; the
			// switchboard's own answers meet the same ledger.
			return nil
		}
		if !ok || env.Error {
			return line
		}
		return sw.answered(ctx, sl, req, line)
	case proxy.KindRequest:
		if sl.name == sw.cfg.Default {
			return line
		}
		out, err := sw.asks.give(sl.name, line, env.ID)
		if err != nil {
			sw.log.Warn("cannot give an agent's request an id of the switchboard's; dropped", "agent", sl.name, "err", err)
			return nil
		}
		return out
	}
	if !env.MethodIs(wire.Update) {
		return line
	}
	if sw.late(sl, f) {
		return nil // a late frame of a native session the session left behind
	}
	switch string(env.Update) {
	case "config_option_update":
		return sw.sel.with(line, sl.name, "params", "update", "configOptions")
	case "available_commands_update":
		if out, err := wire.InsertArray(line, false, [][]byte{sw.sel.command()}, "params", "update", "availableCommands"); err == nil {
			return out
		}
	}
	return line
}

// late says whether an update is for a session bound to another agent that
// it is not joining: the frame comes from the native session the session
// left behind, which the client must not see.
func (sw *Switchboard) late(sl *slot, f *proxy.Frame) bool {
	if sl.elsewhere.Load() == 0 {
		return false
	}
	bound := *sw.boundNow.Load()
	var owner string
	var isBound bool
	if sid, plain := plainSessionID(f); plain {
		owner, isBound = bound[string(sid)] // no copy for the look-up
	} else {
		owner, isBound = bound[wire.SessionIDOf(f)]
	}
	if !isBound || owner == sl.name {
		return false
	}
	sid := wire.SessionIDOf(f)
	sw.mu.Lock()
	m := sw.moves[sid]
	owner = sw.bound[sid]
	sw.mu.Unlock()
	joining := m != nil && m.to == sl.name // the fresh native session's first frames
	return owner != sl.name && !joining
}

// plainSessionID is params.sessionId's bytes inside the frame when it is a
// string without escapes, the common case.
func plainSessionID(f *proxy.Frame) ([]byte, bool) {
	sp := f.Env.SessionID
	if !sp.Present() {
		return nil, true
	}
	tok := f.Raw[sp.Start:sp.End]
	if len(tok) < 2 || tok[0] != '"' || bytes.IndexByte(tok, '\\') >= 0 {
		return nil, false
	}
	return tok[1 : len(tok)-1], true
}

// answered adjusts the response to a client request the switchboard
// follows: it learns which agent a session runs on and shows the selector.
func (sw *Switchboard) answered(ctx context.Context, sl *slot, req pendingReq, line []byte) []byte {
	switch req.method {
	case wire.Initialize:
		sw.learned(ctx, sl, wire.Member(line, "result"))
		return sw.intersect(ctx, line)
	case wire.SessionNew, wire.SessionFork, wire.ExtFork:
		var res struct {
			Result struct {
				SessionID string `json:"sessionId"`
			} `json:"result"`
		}
		// A result without a string sessionId binds nothing.
		_ = json.Unmarshal(line, &res)
		sw.bind(res.Result.SessionID, sl.name)
	case wire.SessionLoad, wire.SessionResume:
		sw.bind(req.sid, sl.name)
	case wire.SetConfigOption:
	default:
		return line
	}
	return sw.sel.with(line, sl.name, "result", "configOptions")
}
