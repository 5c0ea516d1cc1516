package intercept

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
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
	return m.t.splicing()
}

// splicing says whether any session id may need splicing now: some client
// id is mapped, or the sidecar is creating a session.
func (t *table) splicing() bool { return t.mapped.Load() || t.creating.Load() > 0 }

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
	return wire.Splice(raw, sp.Start, sp.End, val)
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
	if t.creatingN == 0 || sc == nil {
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

// beginCreating notes one of the sidecar's own session/new calls.
func (t *table) beginCreating() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.creatingN++
	t.creating.Store(int32(t.creatingN))
}

// endCreating ends one, and when none is left lets every held frame go:
// under its client id when its session is now mapped, else unchanged. It
// runs whatever the call's outcome, and under the same lock holdEarly
// takes, so no frame can be held after the last release.
func (t *table) endCreating() {
	t.mu.Lock()
	t.creatingN--
	t.creating.Store(int32(t.creatingN))
	var held map[string][]early
	if t.creatingN == 0 {
		held, t.early = t.early, nil
	}
	client := map[string]string{}
	for n := range held {
		if c, ok := t.client[n]; ok {
			client[n] = c
		}
	}
	t.mu.Unlock()
	for n, frames := range held {
		for _, e := range frames {
			line := e.raw
			if c, ok := client[n]; ok {
				if env, err := proxy.Scan(line); err == nil && env.SessionID.Present() {
					line = respliceID(line, env.SessionID, c)
				}
			}
			e.release(line)
		}
	}
}
