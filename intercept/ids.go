package intercept

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// idMapper keeps the client's session id stable while the native session
// behind it is replaced. It rewrites params.sessionId, and nothing else, in
// every frame that names a remapped session: client->agent requests and
// notifications get the native id, and agent->client frames (session/update,
// session/request_permission, fs/*, terminal/*, …) get the client's. Until
// the first rebuild nothing is mapped and it claims nothing.
//
// While the sidecar creates a native session of its own, an agent frame for
// a session nobody knows yet is held: agents send updates for a new session
// before the session/new response (DESIGN.md "Data flow" 6), and the client
// must get them under its own id, after the mapping exists.
type idMapper struct {
	t  *table
	sc *Recorder
}

// Claims takes frames with a sessionId once anything is mapped, or while
// the sidecar is creating a session.
func (m idMapper) Claims(_ proxy.Direction, env *proxy.Envelope) bool {
	if !env.SessionID.Present() {
		return false
	}
	return m.t.mapped.Load() || m.t.creating.Load() > 0
}

// Intercept splices the mapped id in place of the frame's.
func (m idMapper) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	sp := f.Env.SessionID
	var id string
	if err := json.Unmarshal(f.Raw[sp.Start:sp.End], &id); err != nil {
		return proxy.Verdict{}, nil // not a string: not ours to map
	}
	if f.Dir == proxy.AgentToClient && m.t.holdEarly(id, f.Raw, m.sc.sc) {
		return proxy.Verdict{Do: proxy.Drop}, nil
	}
	to := m.t.clientOf(id)
	if f.Dir == proxy.ClientToAgent {
		to = m.t.nativeOf(id)
	}
	if to == id {
		return proxy.Verdict{}, nil
	}
	return proxy.Verdict{Do: proxy.Rewrite, Line: respliceID(f.Raw, sp, to)}, nil
}

func respliceID(raw []byte, sp proxy.Span, id string) []byte {
	val, _ := json.Marshal(id)
	return splice(raw, sp.Start, sp.End, val)
}

// early is an agent frame held until its session is mapped.
type early struct {
	raw     []byte
	release func(lines ...[]byte)
}

// holdEarly holds a frame for an unknown session while one is being created.
func (t *table) holdEarly(native string, raw []byte, sc Sidecar) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.creating.Load() == 0 || sc == nil {
		return false
	}
	if _, known := t.client[native]; known {
		return false
	}
	if t.early == nil {
		t.early = map[string][]early{}
	}
	t.early[native] = append(t.early[native], early{raw: append([]byte(nil), raw...), release: sc.Hold(proxy.AgentToClient)})
	return true
}

// releaseEarly lets the frames held for native go, under the client id it
// now maps to, or unchanged when nothing maps it.
func (t *table) releaseEarly(native string) {
	t.mu.Lock()
	held := t.early[native]
	delete(t.early, native)
	client, ok := t.client[native]
	t.mu.Unlock()
	for _, e := range held {
		line := e.raw
		if env, err := proxy.Scan(line); err == nil && ok && env.SessionID.Present() {
			line = respliceID(line, env.SessionID, client)
		}
		e.release(line)
	}
}

// releaseAllEarly lets every held frame go unchanged; for when a creation
// failed and nothing will claim them.
func (t *table) releaseAllEarly() {
	t.mu.Lock()
	var natives []string
	for n := range t.early {
		natives = append(natives, n)
	}
	t.mu.Unlock()
	for _, n := range natives {
		t.releaseEarly(n)
	}
}
