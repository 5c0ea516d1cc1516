package intercept

import (
	"context"
	"encoding/json"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
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
//
// An agent's answer to session/list names its native sessions, of this
// process's life and of earlier ones: each listed session the record knows
// is named by the client's id, once (listed).
type idMapper struct {
	led     *ledger.Ledger
	gate    *ChunkGate
	natives NativeIndex
	rest    restOfChain
}

// A NativeIndex knows which client session a native one stands or stood
// behind, across the sidecar's processes (state.Store.ClientID), and that
// session's record, for the title it lists it with.
type NativeIndex interface {
	ClientID(ctx context.Context, nativeID string) (string, error)
	Session(ctx context.Context, id string) (*state.Session, error)
}

// NewIDs maps session ids through the ledger's client-to-native table, and
// the sessions an agent lists through the record's natives. The gate says
// when it must see chunks: while some session's id differs.
func NewIDs(led *ledger.Ledger, gate *ChunkGate, natives NativeIndex) Interceptor {
	return &idMapper{led: led, gate: gate, natives: natives}
}

func (m *idMapper) goOnWith(rest restOfChain) { m.rest = rest }

// Claims takes frames with a sessionId once anything is mapped, or while
// the sidecar is creating a session, and the agent's results, among which
// Intercept finds the lists.
func (m *idMapper) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	if dir == proxy.AgentToClient && env.Kind == proxy.KindResponse {
		return !env.Error
	}
	if !env.SessionID.Present() {
		return false
	}
	return m.led.Splicing()
}

// Intercept splices the mapped id in place of the frame's, and holds a
// list to name its sessions by their client ids.
func (m *idMapper) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	if f.Env.Kind == proxy.KindResponse {
		if q, ok := ledger.AnsweredOf(ctx); !ok || q.Method != wire.SessionList {
			return proxy.Verdict{}, nil
		}
		raw := append([]byte(nil), f.Raw...)
		return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
			return m.rest(ctx, proxy.AgentToClient, m.listed(ctx, raw))
		}}, nil
	}
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
// mapped, then sends it on through the stages after this one, under its
// client id when it now has one, else unchanged. Every creation ends,
// whatever its call's outcome (endCreating), so no frame is held for ever.
func (m *idMapper) holdEarly(f *proxy.Frame, native string, created <-chan struct{}) proxy.Verdict {
	raw := append([]byte(nil), f.Raw...)
	sp := f.Env.SessionID
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
		select {
		case <-created:
		case <-ctx.Done():
			// The relay is stopping; the frame goes as it came.
		}
		// A frame of a native session the sidecar made for itself meets
		// the hush the lifeline, before this stage, could not apply: the
		// session was not known yet (engine.create).
		if h := m.led.HushOf(native); h != 0 {
			if env, err := proxy.Scan(raw); err == nil && hushes(h, &proxy.Frame{Dir: proxy.AgentToClient, Raw: raw, Env: env}) {
				return proxy.Decision{}
			}
		}
		if c := m.led.ClientOf(native); c != native {
			raw = respliceID(raw, sp, c)
		}
		return m.rest(ctx, proxy.AgentToClient, raw)
	}}
}

// ChunkPolicy: the id mapping claims a chunk only while some id may need
// splicing.
func (m *idMapper) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Gate: m.gate} }

// listed is an agent's session/list result with each session the record
// knows under its client id. A session rebuilt (a reset, a rewind, a
// crash that found its native session gone) has had several native ones,
// and the agent may list more than one of them: the client's session is
// listed once, as and where the agent lists the first of them, with the
// latest updatedAt of them all.
func (m *idMapper) listed(ctx context.Context, raw []byte) []byte {
	var msg struct {
		Result struct {
			Sessions []json.RawMessage `json:"sessions"`
		} `json:"result"`
	}
	if json.Unmarshal(raw, &msg) != nil || len(msg.Result.Sessions) == 0 {
		return raw // nothing the client could take for a session of its own
	}
	type kept struct {
		at      int // in list
		updated string
	}
	seen := make(map[string]kept, len(msg.Result.Sessions))
	list := make([]json.RawMessage, 0, len(msg.Result.Sessions))
	changed := false
	for _, entry := range msg.Result.Sessions {
		var e struct {
			SessionID string `json:"sessionId"`
			UpdatedAt string `json:"updatedAt"`
		}
		if json.Unmarshal(entry, &e) != nil || e.SessionID == "" {
			list = append(list, entry)
			continue
		}
		id := e.SessionID
		if client := m.clientOf(ctx, id); client != id {
			if named, err := wire.SetPath(entry, wire.String(client), "sessionId"); err == nil {
				entry, id, changed = named, client, true
			}
			if titled, ok := m.ownTitle(ctx, client, entry); ok {
				entry, changed = titled, true
			}
		}
		k, dup := seen[id]
		if !dup {
			seen[id] = kept{at: len(list), updated: e.UpdatedAt}
			list = append(list, entry)
			continue
		}
		changed = true
		if later(e.UpdatedAt, k.updated) {
			if dated, err := wire.SetPath(list[k.at], wire.String(e.UpdatedAt), "updatedAt"); err == nil {
				list[k.at] = dated
				seen[id] = kept{at: k.at, updated: e.UpdatedAt}
			}
		}
	}
	if !changed {
		return raw
	}
	out, err := wire.SetPath(raw, wire.Encode(list), "result", "sessions")
	if err != nil {
		return raw // it decoded above; a result that will not take the list back goes as it came
	}
	return out
}

// clientOf is the client session a listed native session stands or stood
// behind: this process's mapping first, then the record's, which knows
// the natives of earlier processes. A native session neither knows, or
// the record cannot say now (the store is out of reach), is its own.
func (m *idMapper) clientOf(ctx context.Context, native string) string {
	if c := m.led.ClientOf(native); c != native {
		return c
	}
	if c, err := m.natives.ClientID(ctx, native); err == nil && c != "" {
		return c
	}
	return native
}

// ownTitle is a listed entry of client session sid with the session's own
// title, where the record has one: the agent lists the native session
// behind it, which a reset, a rewind or a rebuild made, under the title
// it gave that native session (its first prompt, or "… (fork)"), and the
// session keeps its title through those (DESIGN.md "A session's whole
// life"). ok false leaves the entry as it is.
func (m *idMapper) ownTitle(ctx context.Context, sid string, entry json.RawMessage) (json.RawMessage, bool) {
	rec, err := m.natives.Session(ctx, sid)
	if err != nil || rec.Title == "" {
		return nil, false
	}
	if string(wire.Member(entry, "title")) == string(wire.String(rec.Title)) {
		return nil, false
	}
	titled, err := wire.SetPath(entry, wire.String(rec.Title), "title")
	return titled, err == nil
}

// later says whether updatedAt a is after b; either may be absent ("").
// They are ISO 8601 timestamps (RFC 3339), which agents write in UTC; one
// that does not parse is not later than anything.
func later(a, b string) bool {
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		return false
	}
	tb, err := time.Parse(time.RFC3339Nano, b)
	return err != nil || ta.After(tb)
}
