package switchboard

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

var _ proxy.Egress = (*slot)(nil)

// Egress is the switchboard's part in what an agent's relay writes to the
// client (proxy.Egress): it runs on the relay's goroutines, for the
// agent's frames after its chain, the frames its recorder holds and
// releases or writes of its own, and the answers it gives. Most frames are
// message chunks, and a chunk costs a few compares and one load unless a
// session runs on another agent, then one lock-free map look-up.
func (sl *slot) Egress(_ context.Context, f *proxy.Frame) []byte {
	// The switchboard's own context: what a frame starts here (an agent
	// started to learn its capabilities) lives as long as the switchboard,
	// not as the relay that wrote the frame.
	return sl.sw.agentFrame(sl.sw.ctx, sl, f)
}

// agentFrame decides what the client sees of one agent frame; nil is
// nothing.
func (sw *Switchboard) agentFrame(ctx context.Context, sl *slot, f *proxy.Frame) []byte {
	env, line := &f.Env, f.Raw
	switch env.Kind {
	case proxy.KindResponse:
		sw.mu.Lock()
		req, ok := sw.pending[string(env.ID)]
		if ok {
			delete(sw.pending, string(env.ID))
		}
		sw.mu.Unlock()
		if ok {
			// The agent's chain held it to one answer already; the
			// switchboard's own answers meet the same ledger.
			if _, first := sw.answers.Respond(ledger.Key(env.ID)); !first {
				sw.bug("an agent answered a request the switchboard had answered; the agent's answer is dropped", env.ID)
				return nil
			}
		}
		if !ok || env.Error {
			return line
		}
		return sw.answered(ctx, sl, req, line)
	case proxy.KindRequest:
		if sl.name == sw.cfg.Default {
			return line
		}
		ask := askPrefix + strconv.FormatUint(sw.seq.Add(1), 10) + `"`
		out, err := wire.SetPath(line, []byte(ask), "id")
		if err != nil {
			sw.log.Warn("cannot give an agent's request an id of the switchboard's; dropped", "agent", sl.name, "err", err)
			return nil
		}
		sw.mu.Lock()
		sw.asked[ask] = agentAsk{agent: sl.name, id: bytes.Clone(env.ID)}
		sw.mu.Unlock()
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
		return sw.withSelector(line, sl.name, "params", "update", "configOptions")
	case "available_commands_update":
		if out, err := wire.InsertArray(line, false, [][]byte{agentCommandJSON(sw.names())}, "params", "update", "availableCommands"); err == nil {
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
	return sw.withSelector(line, sl.name, "result", "configOptions")
}

// selectorJSON is the agent selector with current selected.
func (sw *Switchboard) selectorJSON(current string) []byte {
	opts := make([]map[string]any, 0, len(sw.cfg.Agents))
	for _, a := range sw.cfg.Agents {
		opts = append(opts, map[string]any{"value": a.Name, "name": a.Name, "description": strings.Join(a.Command, " ")})
	}
	b := wire.Encode(map[string]any{
		"id": SelectorID, "name": "Agent", "description": "acp-sidecar: the agent this session runs on; switching keeps the conversation",
		"category": selectorCategory, "type": "select", "currentValue": current, "options": opts,
	})
	return b
}

// withSelector appends the selector to the configOptions list at path, when
// there is one: an agent without config options keeps its legacy modes and
// models, which a list of the selector alone would hide in some editors.
func (sw *Switchboard) withSelector(line []byte, current string, path ...string) []byte {
	start, end, ok := wire.Find(line, path...)
	if !ok || wire.IsNull(line[start:end]) {
		return line
	}
	out, err := wire.InsertArray(line, false, [][]byte{sw.selectorJSON(current)}, path...)
	if err != nil {
		return line
	}
	return out
}

// agentCommandJSON is the /agent entry of a command list.
func agentCommandJSON(names []string) []byte {
	b := wire.Encode(map[string]any{
		"name":        "agent",
		"description": "acp-sidecar: move this session to another agent (" + strings.Join(names, ", ") + "); the kept turns go with it",
		"input":       map[string]any{"hint": "NAME"},
	})
	return b
}
