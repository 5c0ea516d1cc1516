package intercept

import (
	"context"
	"errors"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// What the agent cannot do, the sidecar does for it (DESIGN.md "A session's
// whole life", "Surfaces"): it loads and resumes any session the record
// knows, lists the recorded sessions, and closes, deletes and forks a
// session, where the agent lacks the method or the session's native session
// died with it. The client is promised all of them in initialize
// (commands.go, advertise).

// emulation is the stage after the lifeline that decides the client's
// session/load, resume, list, close, delete and fork: it passes on what
// the agent can do itself, and answers the rest from the record, once the
// request's turn in the lifeline's waiting room has come.
type emulation struct {
	room WaitingRoom
	ops  EmulationOps
	led  *ledger.Ledger
	life *life.Life  // what the agent can do
	rest restOfChain // where a request the agent answers goes on (holder)
}

// A WaitingRoom is where a client request waits for the agent's life and
// for its session (the Lifeline).
type WaitingRoom interface {
	// MustWait says whether a request on session sid ("" for none) has to
	// wait now: the agent restarts, or the session is being rebuilt or
	// died with the agent. It must not block.
	MustWait(sid string) bool
	// Hold keeps f's place in the client's stream until the agent is up
	// and session sid is not being rebuilt, then decides f by decide, on a
	// goroutine the relay owns. A stale session is not rebuilt for it. When
	// the wait ends otherwise (the agent dead, a cancel, the timeout) the
	// room answers f itself, and decide is not called.
	Hold(f *proxy.Frame, sid string, decide Decider) proxy.Verdict
}

// EmulationOps is what the emulation asks of the owners of the sessions
// (Core.EmulationOps). Each runs off the relay's path, in a held request's
// decision; an error is the request's answer, with the code it carries
// (wire.CodeOf).
type EmulationOps interface {
	// Reopen brings back a session the record knows for the client's load
	// or resume (method; raw is the request), and returns the result to
	// answer with. A nil result means the session is live here and the
	// request goes to the agent as it is; state.ErrNotFound, that the
	// record does not know it, and the agent answers.
	Reopen(ctx context.Context, sid, method string, raw []byte) ([]byte, error)
	// List answers the session/list request raw, under id, from the record:
	// its result or its error.
	List(ctx context.Context, id, raw []byte) []byte
	// CloseHere closes a session the agent cannot close: it lacks
	// session/close, or the session's native session died with it.
	CloseHere(ctx context.Context, sid string) error
	// DeleteHere forgets a session for an agent without session/delete.
	DeleteHere(ctx context.Context, sid string) error
	// ForkHere forks the whole of a session for an agent without
	// session/fork, and returns the fork's id and session/fork result.
	ForkHere(ctx context.Context, parent string) (child string, result []byte, err error)
}

// NewEmulation builds the emulation over the lifeline's waiting room, the
// operations it runs for the agent, the ledger (what is stale, the native
// sessions, the command lists sent) and the agent's life, which says what
// the agent can do itself.
func NewEmulation(room WaitingRoom, ops EmulationOps, led *ledger.Ledger, lf *life.Life) Interceptor {
	return &emulation{room: room, ops: ops, led: led, life: lf}
}

func (em *emulation) goOnWith(rest restOfChain) { em.rest = rest }

// emulated says whether a client request is the emulation's to decide: a
// close or delete of a session, a fork of one on an agent without
// session/fork, and every load, resume and list. The lifeline leaves these
// to the emulation and gates the rest. It reads the agent's capabilities
// only for a fork, which takes a lock.
func emulated(env *proxy.Envelope, lf *life.Life) bool {
	switch {
	case env.MethodIs(wire.SessionLoad), env.MethodIs(wire.SessionResume), env.MethodIs(wire.SessionList):
		return true
	case !env.SessionID.Present():
		return false
	case env.MethodIs(wire.SessionClose), env.MethodIs(wire.SessionDelete):
		return true
	}
	return env.MethodIs(wire.SessionFork) && !lf.Caps().Fork
}

// Claims: the client's session/load, resume, list, close, delete and fork.
func (em *emulation) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	if dir != proxy.ClientToAgent || env.Kind != proxy.KindRequest {
		return false
	}
	switch string(env.Method) {
	case wire.SessionLoad, wire.SessionResume, wire.SessionList, wire.SessionClose, wire.SessionDelete, wire.SessionFork:
		return true
	}
	return false
}

// Intercept passes on what the agent does itself, and holds the rest in
// the waiting room, to be decided when its turn comes.
func (em *emulation) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	if decided(ctx, f.Env.ID) || !emulated(&f.Env, em.life) {
		return proxy.Verdict{}, nil
	}
	method, sid := string(f.Env.Method), ""
	if f.Env.SessionID.Present() {
		sid = wire.SessionIDOf(f)
	}
	switch method {
	case wire.SessionClose:
		return em.closing(f, sid), nil
	case wire.SessionDelete:
		return em.deleting(f, sid), nil
	case wire.SessionFork:
		return em.room.Hold(f, sid, em.fork), nil
	}
	if !em.room.MustWait(sid) && !em.emulates(method, sid) {
		return proxy.Verdict{}, nil
	}
	// The decision needs the recorder, off the relay's path.
	return em.room.Hold(f, sid, em.emulate), nil
}

// ChunkPolicy: the emulation never claims a chunk.
func (em *emulation) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Never: true} }

// A request the lifeline held and then let go on was decided there, as it
// decides every client request once: the emulation passes it on as it is.
// The lifeline marks the context it goes on with (wentOn).
type wentOnKey struct{}

// wentOn marks ctx as that of the request under id, which the lifeline
// held and lets go on.
func wentOn(ctx context.Context, id []byte) context.Context {
	return context.WithValue(ctx, wentOnKey{}, ledger.Key(id))
}

// decided says whether the lifeline held the request under id and let it
// go on with ctx.
func decided(ctx context.Context, id []byte) bool {
	k, ok := ctx.Value(wentOnKey{}).(string)
	return ok && k == ledger.Key(id)
}

// closing decides a client's session/close. It goes to the agent when the
// agent can close and the session's native session lives; else the
// sidecar closes the session itself and answers. Either way the session
// is never rebuilt for it: closing a session whose native session died
// with the agent rebuilds nothing.
func (em *emulation) closing(f *proxy.Frame, sid string) proxy.Verdict {
	if em.life.Caps().Close && !em.room.MustWait(sid) {
		return proxy.Verdict{} // the record marks it closed on the agent's answer
	}
	return em.room.Hold(f, sid, func(ctx context.Context, q Held) proxy.Decision {
		if em.life.Caps().Close && !em.led.IsStale(sid) {
			return em.rest(ctx, proxy.ClientToAgent, q.Raw)
		}
		if err := em.ops.CloseHere(ctx, sid); err != nil {
			return answerWith(proxy.ErrorResponse(q.ID, wire.CodeOf(err), err.Error()))
		}
		return answerWith(wire.Response(q.ID, []byte("{}")))
	})
}

// fork decides a client's session/fork on an agent without one: the
// sidecar forks the session from the record (Sessions.Fork), answers with
// the fork's id and config, and sends its commands for the fork.
func (em *emulation) fork(ctx context.Context, q Held) proxy.Decision {
	child, result, err := em.ops.ForkHere(ctx, q.Session)
	if err != nil {
		return answerWith(proxy.ErrorResponse(q.ID, wire.CodeOf(err), err.Error()))
	}
	return answerWith(append([][]byte{wire.Response(q.ID, result)}, ownCommands(em.led, em.life, em.led.NativeOf(child), child)...)...)
}

// deleting decides a client's session/delete. It goes to the agent when the
// agent can delete (the record forgets the session once the agent has),
// else the sidecar forgets the session and answers. A session whose native
// session died with the agent is not rebuilt for it: real agents keep
// sessions on disk, so the delete still goes to the agent under the native
// id the session last had.
func (em *emulation) deleting(f *proxy.Frame, sid string) proxy.Verdict {
	if em.life.Caps().Delete && !em.room.MustWait(sid) {
		return proxy.Verdict{}
	}
	return em.room.Hold(f, sid, func(ctx context.Context, q Held) proxy.Decision {
		if em.life.Caps().Delete {
			return em.rest(ctx, proxy.ClientToAgent, q.Raw)
		}
		if err := em.ops.DeleteHere(ctx, sid); err != nil {
			return answerWith(proxy.ErrorResponse(q.ID, wire.CodeOf(err), err.Error()))
		}
		return answerWith(wire.Response(q.ID, []byte("{}")))
	})
}

// emulates says whether the sidecar decides a client's session/load,
// session/resume or session/list itself: a load or resume of a session the
// record may know is rebuilt (natively where the agent can, else emulated),
// and a list the agent cannot make is answered from the record.
func (em *emulation) emulates(method, sid string) bool {
	caps := em.life.Caps()
	switch {
	case method == wire.SessionList:
		return !caps.List
	case method == wire.SessionLoad && wire.Version(caps.Protocol) >= wire.V2:
		return false // v2 has no session/load: the agent says so, as the sidecar advertised none
	}
	return sid != ""
}

// emulate decides a held session/load, session/resume or session/list
// once the agent is up: an unknown session goes to the agent for its own
// answer, a known one is reopened from the record.
func (em *emulation) emulate(ctx context.Context, q Held) proxy.Decision {
	if !em.emulates(q.Method, q.Session) {
		return em.rest(ctx, proxy.ClientToAgent, q.Raw)
	}
	if q.Method == wire.SessionList {
		return answerWith(em.ops.List(ctx, q.ID, q.Raw))
	}
	line, err := em.ops.Reopen(ctx, q.Session, q.Method, q.Raw)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return em.rest(ctx, proxy.ClientToAgent, q.Raw) // not ours: the agent answers, with its own error if it must
	case err != nil:
		return answerWith(proxy.ErrorResponse(q.ID, wire.CodeOf(err), err.Error()))
	case line == nil:
		return em.rest(ctx, proxy.ClientToAgent, q.Raw) // live here: the agent has it
	default:
		// The sidecar's commands follow, as after every open the client
		// makes, unless the agent sent its list during the reopen.
		return answerWith(append([][]byte{wire.Response(q.ID, line)}, ownCommands(em.led, em.life, em.led.NativeOf(q.Session), q.Session)...)...)
	}
}
