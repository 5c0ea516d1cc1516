package rebuild

import (
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// HistoryUpdates renders recorded turns as the session/update notifications
// an agent's own replay sends, in the connection's version: the user's
// message, the agent's answer, and each tool call with its final status.
// v2 sends whole messages, each under a message id, and after the replay
// the session's state, which a v2 client waits for before the open's
// answer (it is sent even with no turn to replay).
func HistoryUpdates(v wire.Version, sid string, turns []state.Turn) [][]byte {
	var out [][]byte
	// A message keeps the id the client had it under live, where the
	// record has it, as a replayed v2 message must.
	message := func(kind, chunk, id, text string) []byte {
		block := map[string]any{"type": "text", "text": text}
		if v < wire.V2 {
			return wire.SessionUpdate(sid, map[string]any{"sessionUpdate": chunk, "content": block})
		}
		if id == "" {
			id = wire.NewMessageID()
		}
		return wire.SessionUpdate(sid, map[string]any{"sessionUpdate": kind, "messageId": id, "content": []any{block}})
	}
	toolCall := "tool_call"
	if v >= wire.V2 {
		toolCall = "tool_call_update" // v2's one upsert of a tool call
	}
	for _, t := range turns {
		if t.Status == state.TurnCancelled && t.Answer == "" {
			continue
		}
		if t.Origin != state.OriginAgent { // a turn the agent began has no user message
			out = append(out, message("user_message", "user_message_chunk", t.UserMessageID, t.PromptText))
		}
		for _, tc := range t.ToolCalls {
			out = append(out, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": toolCall, "toolCallId": tc.ID, "title": tc.Title, "status": tc.Status}))
		}
		if t.Answer != "" {
			out = append(out, message("agent_message", "agent_message_chunk", t.MessageID, t.Answer))
		}
	}
	if v >= wire.V2 {
		out = append(out, wire.StateUpdate(sid, "idle", ""))
	}
	return out
}
