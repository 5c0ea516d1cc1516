package wire

import "encoding/json"

// claude-agent-acp 0.101.0 (dist/fork-session.js) and codex-acp 2.6.0
// (src/SessionFork.ts) fork a session at one of its messages when
// session/fork's params carry `_meta.jetbrains.air.fork` with version 1
// and the messageId of an agent message: the fork keeps the history up to
// it. The key is JetBrains AIR's; no capability advertises it.

// forkAt is the shape of that _meta member.
type forkAt struct {
	JetBrains struct {
		Air struct {
			Fork *struct {
				Version   int    `json:"version"`
				MessageID string `json:"messageId"`
			} `json:"fork"`
		} `json:"air"`
	} `json:"jetbrains"`
}

// ForkAtMeta is the session/fork _meta that asks for a fork at messageID.
func ForkAtMeta(messageID string) map[string]any {
	return map[string]any{"jetbrains": map[string]any{"air": map[string]any{"fork": map[string]any{"version": 1, "messageId": messageID}}}}
}

// ForkAtOf is the messageId a session/fork's params ask to fork at, ""
// when they ask for none (no fork point of version 1).
func ForkAtOf(params json.RawMessage) string {
	var p struct {
		Meta forkAt `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta.JetBrains.Air.Fork == nil || p.Meta.JetBrains.Air.Fork.Version != 1 {
		return ""
	}
	return p.Meta.JetBrains.Air.Fork.MessageID
}
