package intercept

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
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
	led  *ledger.Ledger
	gate *ChunkGate
}

// NewIDs maps session ids through the ledger's client-to-native table. The
// gate says when it must see chunks: while some session's id differs.
func NewIDs(led *ledger.Ledger, gate *ChunkGate) Interceptor { return idMapper{led: led, gate: gate} }

// Claims takes frames with a sessionId once anything is mapped, or while
// the sidecar is creating a session.
func (m idMapper) Claims(_ proxy.Direction, env *proxy.Envelope) bool {
	if !env.SessionID.Present() {
		return false
	}
	return m.led.Splicing()
}

// Intercept splices the mapped id in place of the frame's.
func (m idMapper) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	sp := f.Env.SessionID
	var id string
	if err := json.Unmarshal(f.Raw[sp.Start:sp.End], &id); err != nil {
		return proxy.Verdict{}, nil // not a string: not ours to map
	}
	if f.Dir == proxy.AgentToClient {
		if created := m.led.Early(id); created != nil {
			return m.holdEarly(f, id, created), nil
		}
	}
	to := m.led.ClientOf(id)
	if f.Dir == proxy.ClientToAgent {
		to = m.led.NativeOf(id)
	}
	if to == id {
		return proxy.Verdict{}, nil
	}
	return proxy.Verdict{Do: proxy.Rewrite, Line: respliceID(f.Raw, sp, to)}, nil
}

func respliceID(raw []byte, sp proxy.Span, id string) []byte {
	val := wire.String(id)
	return wire.Splice(raw, sp.Start, sp.End, val)
}

// holdEarly keeps an agent frame's place until the session it names may be
// mapped, then sends it under its client id when it now has one, else
// unchanged. Every creation ends, whatever its call's outcome
// (endCreating), so no frame is held for ever.
func (m idMapper) holdEarly(f *proxy.Frame, native string, created <-chan struct{}) proxy.Verdict {
	raw := append([]byte(nil), f.Raw...)
	sp := f.Env.SessionID
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
		select {
		case <-created:
		case <-ctx.Done():
			// The relay is stopping; the frame goes as it came.
		}
		if c := m.led.ClientOf(native); c != native {
			raw = respliceID(raw, sp, c)
		}
		return proxy.Decision{Forward: [][]byte{raw}}
	}}
}

// ChunkPolicy: the id mapping claims a chunk only while some id may need
// splicing.
func (m idMapper) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Gate: m.gate} }
