package intercept

import (
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
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
