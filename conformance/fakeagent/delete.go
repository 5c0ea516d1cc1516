package fakeagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	acp "github.com/coder/acp-go-sdk"
)

// methodSessionDelete is session/delete, which acp-go-sdk v0.13.0 does not
// know: its connection answers it with -32601, as it does every method it
// has no type for. With -delete the stdin reader answers it instead (see
// deleteRequest); without, the SDK's -32601 stands, which is what an agent
// that does not advertise sessionCapabilities.delete answers.
const methodSessionDelete = "session/delete"

// deleteRequest answers session/delete {sessionId} with {}: the session is
// forgotten, so a later load, resume, prompt or list sees what it sees for a
// session that never existed (-32002 "Resource not found"), and -state is
// rewritten without it. Per the ACP session-delete RFD, deleting an unknown
// or already deleted session succeeds silently. A request without a string
// sessionId gets -32602. The stdin reader calls it and writes the answer,
// before any later line reaches the SDK, so a request sent after the answer
// never sees the session; a prompt already in flight on it finishes on its
// own copy and is not persisted. A notification (no id) deletes and is not
// answered.
func (ss *sessionStore) deleteRequest(params json.RawMessage) (json.RawMessage, *acp.RequestError) {
	var p struct {
		SessionID *string `json:"sessionId"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == nil {
		return nil, invalid("sessionId", string(params), "session/delete needs a string sessionId")
	}
	ss.forget(*p.SessionID)
	return json.RawMessage(`{}`), nil
}

// forget removes session sid from memory and from -state. An unknown sid
// is no error and changes nothing.
func (ss *sessionStore) forget(sid string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, ok := ss.byID[sid]; !ok {
		return
	}
	delete(ss.byID, sid)
	for i, o := range ss.order {
		if o == sid {
			ss.order = append(ss.order[:i:i], ss.order[i+1:]...)
			break
		}
	}
	ss.persistLocked()
}

// withDeleteCapability returns the initialize response line with
// "delete":{} added to agentCapabilities.sessionCapabilities, which the
// SDK's SessionCapabilities has no field for. Keys stay sorted, as the SDK
// writes them. If the line has no sessionCapabilities object (it always
// has), it is returned unchanged and the miss is reported on stderr.
func withDeleteCapability(line []byte, stderr io.Writer) []byte {
	key := []byte(`"sessionCapabilities":`)
	i := bytes.Index(line, key)
	if i < 0 {
		fmt.Fprintf(stderr, "fakeagent: initialize response has no sessionCapabilities; delete not advertised\n")
		return line
	}
	start := i + len(key)
	dec := json.NewDecoder(bytes.NewReader(line[start:]))
	var caps map[string]json.RawMessage
	if err := dec.Decode(&caps); err != nil || caps == nil {
		fmt.Fprintf(stderr, "fakeagent: initialize response sessionCapabilities: %v; delete not advertised\n", err)
		return line
	}
	end := start + int(dec.InputOffset())
	caps["delete"] = json.RawMessage(`{}`)
	obj, err := json.Marshal(caps) // sorts the keys, as the SDK's own marshalling does
	if err != nil {
		fmt.Fprintf(stderr, "fakeagent: initialize response sessionCapabilities: %v; delete not advertised\n", err)
		return line
	}
	out := append([]byte(nil), line[:start]...)
	out = append(out, obj...)
	return append(out, line[end:]...)
}
