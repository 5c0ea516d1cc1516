package fakeagent

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// A v2 prompt (v2.go) is answered as soon as it is inserted, and its end is
// a state_update, where v1 answered at the end with the stopReason. As
// claude-agent-acp 0.101.0 writes a turn (testdata/v2):
//
//	session/update user_message {messageId: M, content: the prompt's blocks}
//	response {messageId: M}
//	session/update state_update {state: running}
//	… the turn's updates, as the v1 agent writes them …
//	session/update state_update {state: idle, stopReason: the v1 stopReason}
//
// The adapter inserts the prompt, writing the first three at once, and
// hands the SDK the v1 prompt under an id of its own, so the v1 answer
// comes back to it and becomes the idle state_update; the client never
// sees a v1 answer. session/cancel stays v1's notification: the v1 turn
// answers cancelled, and so the idle update says cancelled. A crash writes
// nothing more, so no idle follows.
//
// Errors: the schema's IdleStateUpdate says of stopReason error that "a
// prompt failure before insertion also requires an error response to
// session/prompt. After insertion, the prompt's response remains
// successful." So the adapter checks before inserting what it can (the
// session exists, the prompt has a block; else the error is the answer,
// and nothing is inserted), and a v1 error after insertion (say "switch
// mode" to a mode the catalog lacks, or a session deleted meanwhile) ends
// the turn with state_update idle, stopReason error, carrying the v1 error
// object.
//
// Message ids are deterministic: turn k of session S has the user message
// UserMessageID(S, k) and the agent message MessageID(S, k), the id the v1
// agent's chunks carry (in v2 agentText always sets it). k is the number of
// turns S had when the prompt was inserted, plus one, and never repeats in
// a process; the v1 agent numbers the turn the same way, since a client
// sends one prompt at a time per session, so a replay finds the user id by
// the turn's place in the history.

// v2turn is one v2 prompt, from its insertion to its idle state_update.
type v2turn struct {
	sid    string
	client json.RawMessage // the client's request id, answered at insertion
	user   string          // the user message's id
	agent  string          // the agent message's id, for chunks the v1 agent wrote without one
	ended  bool            // the idle state_update is out
	// accept is the answer to the client's prompt while it waits for the
	// turn's idle (-late-accept); nil once it is out.
	accept []byte
}

// prompt inserts the v2 prompt env and returns the v1 prompt for the SDK,
// under the adapter's own id; a prompt it refuses it answers, and returns
// nil. A prompt notification (no id) is the SDK's to ignore.
func (v *v2adapter) prompt(line []byte, env envelope) ([]byte, envelope) {
	if !env.hasID() {
		return line, env
	}
	var p struct {
		SessionID string          `json:"sessionId"`
		Prompt    json.RawMessage `json:"prompt"`
	}
	var blocks []json.RawMessage
	if json.Unmarshal(env.Params, &p) != nil || json.Unmarshal(p.Prompt, &blocks) != nil {
		v.out.answerRaw(env.ID, nil, invalid("prompt", string(p.Prompt), "session/prompt needs {sessionId, prompt: [ContentBlock]}"))
		return nil, env
	}
	if len(blocks) == 0 {
		// PromptRequest: "Clients MUST NOT send an empty array. Agents MAY
		// reject one with -32602 without inserting it."
		v.out.answerRaw(env.ID, nil, invalid("prompt", string(p.Prompt), "a prompt needs at least one content block"))
		return nil, env
	}
	turns, rerr := v.sessions.turnsOf(p.SessionID)
	if rerr != nil {
		v.out.answerRaw(env.ID, nil, rerr)
		return nil, env
	}
	sid := p.SessionID
	v.mu.Lock()
	k := max(turns, v.last[sid]) + 1
	v.last[sid] = k
	v.next++
	id := json.RawMessage(strconv.Quote("fakeagent-v2-prompt-" + strconv.Itoa(v.next)))
	t := &v2turn{sid: sid, client: env.ID, user: UserMessageID(sid, k), agent: MessageID(sid, k)}
	v.prompts[idKey(id)] = t
	v.live[sid] = t
	v.mu.Unlock()

	accept := resultLine(env.ID, json.RawMessage(`{"messageId":`+jsonString(t.user)+`}`))
	insert := messageUpdateLine(sid, "user_message", t.user, p.Prompt)
	if v.lateAccept {
		t.accept = accept // after the idle (endTurnLocked)
	} else {
		insert = append(insert, accept...)
	}
	insert = append(insert, stateLine(sid, "running", "", nil)...)
	v.out.writeRaw(insert) // one write: nothing comes in between
	return messageLine(id, env.Method, env.Params), envelope{ID: id, Method: env.Method, Params: env.Params}
}

// endTurnLocked turns the v1 answer f to t's v1 prompt into t's idle
// state_update. A second answer to it (-answer-twice session/prompt) goes
// to the client as it is, under the client's id, as the v1 agent's second
// answer does. v.mu must be held.
func (v *v2adapter) endTurnLocked(t *v2turn, f v2frame) []byte {
	if t.ended {
		if f.Error != nil {
			return []byte(`{"jsonrpc":"2.0","id":` + string(t.client) + `,"error":` + string(f.Error) + "}\n")
		}
		return resultLine(t.client, f.Result)
	}
	t.ended = true
	if v.live[t.sid] == t {
		delete(v.live, t.sid)
	}
	accept := t.accept
	t.accept = nil
	if f.Error != nil {
		return append(stateLine(t.sid, "idle", "error", f.Error), accept...)
	}
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(f.Result, &r); err != nil {
		fmt.Fprintf(v.stderr, "fakeagent: v2 end of turn on %s: %v; idle without a stopReason\n", t.sid, err)
	}
	return append(stateLine(t.sid, "idle", r.StopReason, nil), accept...)
}

// bigPrompt answers in v2 a prompt too long for the SDK (handleBig, whose
// result res describes what arrived): res gains the messageId, and the
// turn is inserted, runs and ends at once. The user message is inserted
// empty, not echoed, and is not a turn of the session's history, so its id
// is one of the adapter's own.
func (v *v2adapter) bigPrompt(id json.RawMessage, sid string, res map[string]any) {
	v.mu.Lock()
	mid := v.ownIDLocked(sid, "big prompt")
	v.mu.Unlock()
	res["messageId"] = mid
	body, err := marshal(res)
	if err != nil {
		fmt.Fprintf(v.stderr, "fakeagent: v2 big prompt result: %v\n", err)
		return
	}
	lines := messageUpdateLine(sid, "user_message", mid, json.RawMessage(`[]`))
	lines = append(lines, resultLine(id, body)...)
	lines = append(lines, stateLine(sid, "running", "", nil)...)
	lines = append(lines, stateLine(sid, "idle", "end_turn", nil)...)
	v.out.writeRaw(lines)
}

// ownIDLocked is a new id for a message of session sid that is no turn's:
// a chunk the v1 agent wrote without messageId outside any turn (a resume
// note), or a big prompt. v.mu must be held.
func (v *v2adapter) ownIDLocked(sid, what string) string {
	v.own[sid]++
	return uuidFrom("fake-agent " + what + " " + sid + "/" + strconv.Itoa(v.own[sid]))
}

// stateLine is the session/update line of sid with a state_update: state,
// and stopReason and error if not empty.
func stateLine(sid, state, stopReason string, rerr json.RawMessage) []byte {
	u := `{"sessionUpdate":"state_update","state":` + jsonString(state)
	if stopReason != "" {
		u += `,"stopReason":` + jsonString(stopReason)
	}
	if len(rerr) > 0 {
		u += `,"error":` + string(rerr)
	}
	return updateLine(sid, u+"}")
}

// messageUpdateLine is the session/update line of sid with a user_message
// or agent_message (kind) upsert: messageId id and content.
func messageUpdateLine(sid, kind, id string, content json.RawMessage) []byte {
	return updateLine(sid, `{"sessionUpdate":`+jsonString(kind)+`,"messageId":`+jsonString(id)+`,"content":`+string(content)+`}`)
}
