package intercept

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// parseCaps reads what the agent said it can do from its initialize result.
func parseCaps(result json.RawMessage) life.Caps {
	var r struct {
		AgentCapabilities struct {
			LoadSession         bool `json:"loadSession"`
			SessionCapabilities map[string]json.RawMessage
		} `json:"agentCapabilities"`
	}
	if json.Unmarshal(result, &r) != nil {
		return life.Caps{} // a result we cannot read promises nothing
	}
	has := func(k string) bool { v, ok := r.AgentCapabilities.SessionCapabilities[k]; return ok && !wire.IsNull(v) }
	return life.Caps{Load: r.AgentCapabilities.LoadSession, Resume: has("resume"), List: has("list"), Fork: has("fork"),
		Close: has("close"), Delete: has("delete")}
}

// emulates says whether the sidecar decides a client's session/load,
// session/resume or session/list itself: a load or resume of a session the
// record may know is rebuilt (natively where the agent can, else emulated),
// and a list the agent cannot make is answered from the record.
func (ll *lifeline) emulates(method, sid string) bool {
	if method == wire.SessionList {
		return !ll.life.Caps().List
	}
	return sid != ""
}

// emulate decides a held session/load, session/resume or session/list
// once the agent is up: an unknown session goes to the agent for its own
// answer, a known one is reopened from the record.
func (ll *lifeline) emulate(ctx context.Context, q waited) proxy.Decision {
	if !ll.emulates(q.method, q.sid) {
		return ll.rest(ctx, proxy.ClientToAgent, q.raw)
	}
	if q.method == wire.SessionList {
		return answerWith(ll.rec.listSessions(ctx, q.id, q.raw))
	}
	line, err := ll.rec.reopen(ctx, q.sid, q.method)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return ll.rest(ctx, proxy.ClientToAgent, q.raw) // not ours: the agent answers, with its own error if it must
	case err != nil:
		return answerWith(proxy.ErrorResponse(q.id, errorCode(err), err.Error()))
	case line == nil:
		return ll.rest(ctx, proxy.ClientToAgent, q.raw) // live here: the agent has it
	default:
		// The sidecar's commands follow, as after every open the client
		// makes, unless the agent sent its list during the reopen.
		return answerWith(append([][]byte{wire.Response(q.id, line)}, ownCommands(ll.led, ll.led.NativeOf(q.sid), q.sid)...)...)
	}
}

// historyUpdates renders recorded turns as the session/update notifications
// an agent's own load replays: the user's message, the agent's answer, and
// each tool call with its final status.
func historyUpdates(sid string, turns []state.Turn) [][]byte {
	var out [][]byte
	for _, t := range turns {
		if t.Status == state.TurnCancelled && t.Answer == "" {
			continue
		}
		out = append(out, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": t.PromptText}}))
		for _, tc := range t.ToolCalls {
			out = append(out, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": tc.ID, "title": tc.Title, "status": tc.Status}))
		}
		if t.Answer != "" {
			out = append(out, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": t.Answer}}))
		}
	}
	return out
}
