package wire

import (
	"encoding/json"
)

// The frames the sidecar writes of its own, and small readers of the ones
// it decodes.

// Response is a JSON-RPC result response under the raw id token.
func Response(id, result []byte) []byte {
	out := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	return append(out, '}')
}

// SessionUpdate is a session/update notification of the sidecar's own.
func SessionUpdate(sessionID string, update map[string]any) []byte {
	return Encode(map[string]any{
		"jsonrpc": "2.0", "method": Update,
		"params": map[string]any{"sessionId": sessionID, "update": update},
	})
}

// Unquote is a JSON string's value, or the raw JSON when it is no string.
func Unquote(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// Member is the raw value at path, nil when there is none.
func Member(raw []byte, path ...string) []byte {
	start, end, ok := Find(raw, path...)
	if !ok {
		return nil
	}
	return raw[start:end]
}

// MaxSlashFrame bounds the prompts read for a slash command: a command is
// short, and a long prompt is not decoded on its way.
const MaxSlashFrame = 16 << 10

// OnlyText is the text of a prompt request made of one text block, the
// only shape a slash command comes in; ok is false for any other prompt,
// and for one over MaxSlashFrame, which is not decoded.
func OnlyText(raw []byte) (text string, ok bool) {
	if len(raw) > MaxSlashFrame {
		return "", false
	}
	var msg struct {
		Params struct {
			Prompt []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"prompt"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &msg) != nil || len(msg.Params.Prompt) != 1 || msg.Params.Prompt[0].Type != "text" {
		return "", false
	}
	return msg.Params.Prompt[0].Text, true
}
