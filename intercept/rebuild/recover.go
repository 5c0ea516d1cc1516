package rebuild

import (
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// HistoryUpdates renders recorded turns as the session/update notifications
// an agent's own load replays: the user's message, the agent's answer, and
// each tool call with its final status.
func HistoryUpdates(sid string, turns []state.Turn) [][]byte {
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
