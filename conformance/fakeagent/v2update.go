package fakeagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// The v1 agent's session updates and permission requests in v2 (v2.go).
// Most updates have the same shape in both versions; these differ:
//
//	current_mode_update        dropped: v2 has no modes, configOptions carry the mode
//	config_option_update       each option's id becomes configId
//	tool_call                  tool_call_update, v2's one tool call upsert
//	available_commands_update  each command gets type "command", a {hint} input type "text"
//	agent_message_chunk        gets a messageId if it has none (v2 requires one): the
//	                           turn's agent message (v2turn.go), outside a turn an id of
//	                           the adapter's own
//	user_message_chunk         likewise, with the turn's user message
//
// In the replay of a resume with replayFrom start (v1's session/load) each
// message is announced before its chunks, as claude-agent-acp 0.101.0 and
// codex-acp 2.6.0 replay (testdata/v2): user_message {messageId, content:
// []} and then user_message_chunk {messageId, content} per prompt block;
// agent_message {messageId, content: []} and then the agent's chunk.

// v2replay follows one replay: the v1 agent replays turn after turn, the
// user's blocks and then the agent's text.
type v2replay struct {
	turn  int    // the turn whose user blocks came last (1-based)
	last  string // the kind of the last replayed chunk
	agent string // the agent message of the last replayed agent chunk
}

// update rewrites one v1 session/update.
func (v *v2adapter) update(line []byte, params json.RawMessage) []byte {
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Kind      string  `json:"sessionUpdate"`
			MessageID *string `json:"messageId"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &p) != nil {
		return line
	}
	switch p.Update.Kind {
	case "current_mode_update":
		return []byte{}
	case "config_option_update":
		return v.editUpdate(line, params, v2OptionsIn)
	case "tool_call":
		return v.editUpdate(line, params, func(u map[string]json.RawMessage) error {
			u["sessionUpdate"] = json.RawMessage(`"tool_call_update"`)
			return nil
		})
	case "available_commands_update":
		if v.inResult != nil {
			return []byte{} // the list went in the session's result
		}
		return v.editUpdate(line, params, v2Commands)
	case "user_message_chunk", "agent_message_chunk":
		return v.chunk(line, params, p.SessionID, p.Update.Kind, p.Update.MessageID)
	}
	return line
}

// editUpdate is line with its update edited by edit; if that fails, line
// as it is, and the failure on stderr.
func (v *v2adapter) editUpdate(line []byte, params json.RawMessage, edit func(map[string]json.RawMessage) error) []byte {
	out, err := editObject(params, func(p map[string]json.RawMessage) error {
		u, err := editObject(p["update"], edit)
		p["update"] = u
		return err
	})
	if err != nil {
		fmt.Fprintf(v.stderr, "fakeagent: v2 session/update: %v; written as v1\n", err)
		return line
	}
	return messageLine(nil, "session/update", out)
}

// v2CommandList is the fake agent's commands (commandsUpdate) as a v2
// availableCommands list, for -commands-in-result; nil if it cannot be
// built, which stderr says.
func v2CommandList(stderr io.Writer) json.RawMessage {
	list, err := marshal(commandsUpdate().AvailableCommandsUpdate.AvailableCommands)
	if err == nil {
		u := map[string]json.RawMessage{"availableCommands": list}
		if err = v2Commands(u); err == nil {
			return u["availableCommands"]
		}
	}
	fmt.Fprintf(stderr, "fakeagent: v2 command list: %v; none in results\n", err)
	return nil
}

// v2Commands gives each of an available_commands_update's commands the
// type v2's AvailableCommand requires, and a v1 unstructured input ({hint})
// the type of v2's TextCommandInput.
func v2Commands(u map[string]json.RawMessage) error {
	var cmds []map[string]json.RawMessage
	if err := json.Unmarshal(u["availableCommands"], &cmds); err != nil {
		return fmt.Errorf("availableCommands: %w", err)
	}
	for _, c := range cmds {
		if _, ok := c["type"]; !ok {
			c["type"] = json.RawMessage(`"command"`)
		}
		in, ok := c["input"]
		if !ok || string(in) == "null" {
			continue
		}
		typed, err := editObject(in, func(m map[string]json.RawMessage) error {
			if _, ok := m["type"]; !ok {
				m["type"] = json.RawMessage(`"text"`)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("command input: %w", err)
		}
		c["input"] = typed
	}
	b, err := marshal(cmds)
	u["availableCommands"] = b
	return err
}

// chunk gives a message chunk its messageId if it has none and, in a
// replay, writes the message's announcement before its first chunk.
func (v *v2adapter) chunk(line []byte, params json.RawMessage, sid, kind string, has *string) []byte {
	var id string
	if has != nil {
		id = *has
	}
	var announce []byte
	v.mu.Lock()
	r, t := v.replays[sid], v.live[sid]
	switch {
	case kind == "user_message_chunk" && r != nil:
		if r.last != kind {
			r.turn++
		}
		if id == "" {
			id = UserMessageID(sid, r.turn)
		}
		if r.last != kind {
			announce = messageUpdateLine(sid, "user_message", id, json.RawMessage(`[]`))
		}
	case kind == "agent_message_chunk" && r != nil:
		if id == "" {
			id = v.ownIDLocked(sid, "note")
		}
		if r.last != kind || r.agent != id {
			announce = messageUpdateLine(sid, "agent_message", id, json.RawMessage(`[]`))
		}
		r.agent = id
	case id != "":
	case t != nil && kind == "user_message_chunk":
		id = t.user
	case t != nil:
		id = t.agent
	default:
		id = v.ownIDLocked(sid, "note")
	}
	if r != nil {
		r.last = kind
	}
	v.mu.Unlock()
	if has == nil {
		line = v.withMessageID(line, params, kind, id)
	}
	return append(announce, line...)
}

// withMessageID is the chunk line with messageId id added. It inserts the
// member right after the sessionUpdate member, so every other byte stays
// as the v1 agent wrote it (MetaLine's 20-digit integer and <>& among
// them); a line not written that way is re-encoded instead.
func (v *v2adapter) withMessageID(line []byte, params json.RawMessage, kind, id string) []byte {
	member := []byte(`"sessionUpdate":` + jsonString(kind))
	if i := bytes.Index(line, member); i >= 0 {
		i += len(member)
		out := make([]byte, 0, len(line)+len(id)+16)
		out = append(out, line[:i]...)
		out = append(out, `,"messageId":`+jsonString(id)...)
		return append(out, line[i:]...)
	}
	return v.editUpdate(line, params, func(u map[string]json.RawMessage) error {
		u["messageId"] = json.RawMessage(jsonString(id))
		return nil
	})
}

// permission rewrites v1's session/request_permission {sessionId,
// toolCall, options} into v2's {sessionId, title, subject: {type:
// "tool_call", toolCall}, options}; the title is the tool call's. The
// client's answer has the same shape in both versions.
func (v *v2adapter) permission(line []byte, f v2frame) []byte {
	params, err := editObject(f.Params, func(p map[string]json.RawMessage) error {
		tc, ok := p["toolCall"]
		if !ok {
			return nil // not v1's shape: leave it
		}
		var call struct {
			Title string `json:"title"`
		}
		if err := json.Unmarshal(tc, &call); err != nil {
			return fmt.Errorf("toolCall: %w", err)
		}
		if call.Title == "" {
			call.Title = "Permission"
		}
		subject, err := marshal(map[string]json.RawMessage{"type": json.RawMessage(`"tool_call"`), "toolCall": tc})
		if err != nil {
			return err
		}
		delete(p, "toolCall")
		p["title"] = json.RawMessage(jsonString(call.Title))
		p["subject"] = subject
		return nil
	})
	if err != nil {
		fmt.Fprintf(v.stderr, "fakeagent: v2 session/request_permission: %v; written as v1\n", err)
		return line
	}
	return messageLine(f.ID, f.Method, params)
}
