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

// WithoutForkAt is a session/fork's _meta without its fork point, the rest
// byte for byte; nil when nothing else is left. A fork point asks for one
// fork: the session the fork makes keeps the client's other options.
func WithoutForkAt(meta json.RawMessage) json.RawMessage {
	if _, _, ok := Find(meta, "jetbrains", "air", "fork"); !ok {
		return meta
	}
	out, err := Delete(meta, "jetbrains", "air", "fork")
	if err != nil {
		return meta // it was found; a _meta that cannot lose it keeps it
	}
	for _, path := range [][]string{{"jetbrains", "air"}, {"jetbrains"}} {
		if v := Member(out, path...); v != nil && isEmptyObject(v) {
			if trimmed, err := Delete(out, path...); err == nil {
				out = trimmed
			}
		}
	}
	if isEmptyObject(out) {
		return nil
	}
	return out
}

// WithForkAt is meta (a session's creation _meta, or nil) with the fork
// point at messageID set, for the sidecar's own fork at a message: the
// client's other options go with it, byte for byte.
func WithForkAt(meta json.RawMessage, messageID string) json.RawMessage {
	if len(meta) == 0 || IsNull(meta) {
		return Encode(ForkAtMeta(messageID))
	}
	point := Encode(map[string]any{"version": 1, "messageId": messageID})
	out, err := SetPath(meta, point, "jetbrains", "air", "fork")
	if err != nil {
		return Encode(ForkAtMeta(messageID)) // a _meta that is no object takes none of ours
	}
	return out
}

// isEmptyObject says whether raw is {} (with any white space).
func isEmptyObject(raw []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) == 0
}
