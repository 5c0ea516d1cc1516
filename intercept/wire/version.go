package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// Version is an ACP protocol version: the one the agent chose in its
// initialize result, which both sides of the connection then speak.
//
// v2 moves much of what the sidecar reads: options are keyed by configId
// and set with a type, a prompt is answered at once with its messageId and
// its turn ends with a state_update, capabilities and info lose their
// agent/client prefixes, and session/load, set_mode and set_model are gone
// (../shared/acp/agents.md, "ACP v2 on the wire"). Everything that reads
// or writes one of those shapes asks the connection's Version.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

// VersionOf reads protocolVersion from an initialize request's params or
// result. A value that is not a whole number, or none, is v1: the only
// version before numbers were compared.
func VersionOf(msg json.RawMessage) Version {
	n, err := strconv.Atoi(string(bytes.TrimSpace(Member(msg, "protocolVersion"))))
	if err != nil || n < 1 {
		return V1
	}
	return Version(n)
}

// SetOptionParams are the params of a session/set_config_option that sets
// option configID of session sid to value. v2 requires the value's type:
// "boolean" for a boolean option, "id" for a value id.
func SetOptionParams(v Version, sid, configID, optionType string, value json.RawMessage) map[string]any {
	params := map[string]any{"sessionId": sid, "configId": configID, "value": value}
	switch {
	case optionType == "boolean":
		params["type"] = "boolean"
	case v >= V2:
		params["type"] = "id"
	}
	return params
}

// StateUpdate is a v2 session/update that reports the session's foreground
// state; stopReason goes with idle, and "" leaves it out.
func StateUpdate(sid, state, stopReason string) []byte {
	u := map[string]any{"sessionUpdate": "state_update", "state": state}
	if stopReason != "" {
		u["stopReason"] = stopReason
	}
	return SessionUpdate(sid, u)
}

// OwnTurn is the whole turn of a prompt the sidecar answers itself (a
// slash command), with text as the agent's message, in the connection's
// version. v1: the message chunk, then the prompt's answer with stopReason
// end_turn. v2: the user's message inserted, the prompt's answer with its
// messageId, the state running, the message, and idle with end_turn, as a
// v2 agent runs a turn (../shared/acp/agents.md, "ACP v2 on the wire").
// prompt is the prompt's content blocks, for the inserted user message.
func OwnTurn(v Version, sid string, id []byte, prompt json.RawMessage, text string) [][]byte {
	content := map[string]any{"type": "text", "text": text}
	if v < V2 {
		return [][]byte{
			SessionUpdate(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": content}),
			Response(id, []byte(`{"stopReason":"end_turn"}`)),
		}
	}
	if IsNull(prompt) {
		prompt = json.RawMessage("[]")
	}
	user, answer := NewMessageID(), NewMessageID()
	return [][]byte{
		SessionUpdate(sid, map[string]any{"sessionUpdate": "user_message", "messageId": user, "content": prompt}),
		Response(id, Encode(map[string]string{"messageId": user})),
		StateUpdate(sid, "running", ""),
		SessionUpdate(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": answer, "content": content}),
		StateUpdate(sid, "idle", "end_turn"),
	}
}

// NewMessageID is a fresh message id for a message of the sidecar's own,
// shaped as the agents' (a random UUID), so that no agent's id is taken.
func NewMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (its doc)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// StateFailed is a v2 idle state_update for a turn that failed: stop
// reason error, with the failure as a JSON-RPC error. It is v2's answer
// where v1 answers the running prompt with an error, since a v2 prompt was
// answered when it was accepted.
func StateFailed(sid string, code int, message string) []byte {
	return SessionUpdate(sid, map[string]any{
		"sessionUpdate": "state_update", "state": "idle", "stopReason": "error",
		"error": map[string]any{"code": code, "message": message},
	})
}

// WantsHistory says whether a client's open asks for the conversation to be
// replayed: a v1 session/load, or a v2 session/resume with a replayFrom
// (v2 has no session/load). params are the request's.
func WantsHistory(v Version, method string, params json.RawMessage) bool {
	if v < V2 {
		return method == SessionLoad
	}
	return method == SessionResume && !IsNull(Member(params, "replayFrom"))
}

// OptionIn is a config option's JSON as version v names its id: v2's
// configId, v1's id. A session recorded in one version and reopened in the
// other keeps its options in the agent's words of the first (state.Option
// Raw); what reaches the client is in the words of the second.
func OptionIn(v Version, raw json.RawMessage, id string) json.RawMessage {
	want, other := "id", "configId"
	if v >= V2 {
		want, other = other, want
	}
	if Member(raw, want) != nil && Member(raw, other) == nil {
		return raw
	}
	out, err := Delete(raw, other)
	if err != nil {
		out = raw // not an object with that member: nothing to take out
	}
	if next, err := SetPath(out, String(id), want); err == nil {
		out = next
	}
	return out
}

// CommandList is the entries of an availableCommands array, nil for none: a
// v2 agent gives its commands in a session's result as well as in updates.
func CommandList(raw []byte) []json.RawMessage {
	var list []json.RawMessage
	_ = json.Unmarshal(raw, &list) // not a list: no commands to keep
	return list
}
