package intercept

import (
	"context"
	"log/slog"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// The agent's life as the client must not feel it (DESIGN.md "Rebuilding a
// native session", protocol.md §8 items 17-19): when the agent dies, what
// was pending gets a clear error and the sessions are kept; while it
// restarts, requests get a clear error; afterwards each session is rebuilt
// on its next request, before that request goes on.

// Lifeline is the first stage, the gate: a client request goes on only
// once the agent is up and the request's session is ready. It holds a
// request that must wait (wait.go), rebuilds a stale session before the
// request that finds it so, refuses what can never go on (the agent is
// dead, the session is closed or its lease lost), proves a resume by the
// prompt after it (resume.go), and keeps from the client what the agent
// says in answer to the sidecar's own rebuilds. What the agent cannot do
// and the sidecar does for it (a load, resume, list, close, delete or fork)
// it leaves to the emulation after it, which waits here too (Hold).
type Lifeline struct {
	life  *life.Life
	led   *ledger.Ledger
	watch *rebuild.Watch
	gate  *ChunkGate
	ops   LifelineOps
	rest  restOfChain // where a held request goes on (holder)
	log   *slog.Logger
}

// LifelineOps is what the lifeline asks of the owners of the sessions
// (Core.LifelineOps): a rebuild, a turn taken back, a request sent again,
// and a fleet's leases.
type LifelineOps interface {
	// Recover rebuilds a stale session before a held request goes on. It
	// returns a *wire.Error with proxy.CodeBusy when another rebuild took
	// the session first.
	Recover(ctx context.Context, sid string) error
	// TakeBack takes back the turn of a prompt on session sid the agent
	// never received.
	TakeBack(sid string)
	// Again decides a client request again, whose error answer the
	// lifeline dropped (proxy.Relay.Again); it comes back through Again.
	Again(ctx context.Context, line []byte) error
	// Lost is the error for request f on a session another sidecar of a
	// fleet took over (nil while this one serves it). It is asked of every
	// request on a session, and costs a nil check without a fleet.
	Lost(f *proxy.Frame) error
	// Fleet says whether sessions have leases; Confirm then checks with the
	// database, before a prompt goes on, that the lease is still this
	// sidecar's.
	Fleet() bool
	Confirm(ctx context.Context, sid string) error
}

// NewLifeline builds the lifeline over the agent's life and the ledger it
// gates on, the watch it waits with, the gate that lets its chunks through
// while a replay is kept from the client, and the operations it asks of the
// sessions' owners.
func NewLifeline(lf *life.Life, led *ledger.Ledger, watch *rebuild.Watch, gate *ChunkGate, ops LifelineOps, log *slog.Logger) *Lifeline {
	return &Lifeline{life: lf, led: led, watch: watch, gate: gate, ops: ops, log: log}
}

func (ll *Lifeline) goOnWith(rest restOfChain) { ll.rest = rest }

// hushes says whether h, the kinds of hush held on its native session,
// keeps the agent's update f from the client.
func hushes(h ledger.Hush, f *proxy.Frame) bool {
	u := string(f.Env.Update)
	switch {
	case h&ledger.HushAll != 0 && !news(u):
		return true
	case h&ledger.HushRebuild != 0 && ofTurn(u):
		return true
	case h&ledger.HushConfig != 0 && (u == "config_option_update" || u == "current_mode_update"):
		return true
	}
	return false
}

// news says whether an update kind tells the client what it lacks after
// the sidecar opened a native session for it (DESIGN.md "The sidecar's
// voice"): the command list, which replaces the one the client has, and
// the title.
func news(update string) bool {
	return update == "available_commands_update" || update == "session_info_update"
}

// ofTurn says whether an update kind belongs to a turn: what the agent
// says, thinks and does in one (a replay included), the turn's state
// (v2's state_update), its plan, usage, notices and compactions. In answer
// to the sidecar's own open, none of them is news of the client's turn.
// Kinds the sidecar does not know pass.
func ofTurn(update string) bool {
	switch update {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
		"user_message", "agent_message", "agent_thought",
		"tool_call", "tool_call_update", "plan", "plan_update",
		"state_update", "usage_update", "notice",
		"compaction_update", "compaction_summary_chunk":
		return true
	}
	return false
}

// Claims: every client request (each is gated); client responses to a
// dead agent's requests; a cancel while some prompt waits; the agent's
// updates while some are kept from the client; the agent's error answers
// (the first prompt after a resume the agent cannot serve).
func (ll *Lifeline) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	switch {
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindRequest:
		return true
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindResponse:
		return true
	case dir == proxy.AgentToClient && env.Kind == proxy.KindNotification:
		return ll.led.Hushing() && env.SessionID.Present()
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindNotification:
		return env.MethodIs(wire.Cancel) && ll.led.Waiting()
	case dir == proxy.AgentToClient && env.Kind == proxy.KindResponse:
		return env.Error // the first prompt after a resume the agent cannot serve (unproven)
	}
	return false
}

// Intercept gates, holds or refuses.
func (ll *Lifeline) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	switch {
	case f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindResponse:
		id, stale := ledger.Key(f.Env.ID), false
		ll.led.Update(func(f *ledger.Flight) { stale = f.Requests.ClientAnswered(id) })
		if stale {
			return proxy.Verdict{Do: proxy.Drop}, nil // its asker died; nobody waits
		}
		return proxy.Verdict{}, nil
	case f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindNotification:
		// A cancel for a prompt that waits takes it out of the queue; the
		// prompt is answered cancelled, and the agent, which never had
		// it, is not told.
		sid, cancelled := wire.SessionIDOf(f), false
		ll.led.Update(func(f *ledger.Flight) { cancelled = f.Waiters.CancelPrompts(sid) })
		if cancelled {
			return proxy.Verdict{Do: proxy.Drop}, nil
		}
		return proxy.Verdict{}, nil
	case f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindResponse:
		if q, ok := ledger.AnsweredOf(ctx); ok && q.Probe != nil && resumeUnserved(f.Raw) {
			return ll.unserved(ctx, q, f), nil
		}
		return proxy.Verdict{}, nil
	case f.Dir == proxy.AgentToClient:
		if f.Env.MethodIs(wire.Update) && hushes(ll.led.HushOf(wire.SessionIDOf(f)), f) {
			return proxy.Verdict{Do: proxy.Drop}, nil // the client has this history, or it is about a resume it did not ask for
		}
		return proxy.Verdict{}, nil
	}
	// A client request.
	if ll.life.Phase() == life.Dead {
		return answer(proxy.ErrorResponse(f.Env.ID, proxy.CodeAgentGone, ll.watch.DeadError().Error())), nil
	}
	method := string(f.Env.Method)
	if method == wire.Prompt && ll.led.Proving() && f.Env.SessionID.Present() {
		ll.proving(ledger.Key(f.Env.ID), wire.SessionIDOf(f), f.Raw)
	}
	if f.Env.SessionID.Present() && method != wire.SessionLoad && method != wire.SessionResume {
		// A load or resume may take the lease back (reopen); anything else
		// on a session whose lease is lost would fork the record.
		if err := ll.ops.Lost(f); err != nil {
			return answer(proxy.ErrorResponse(f.Env.ID, wire.CodeOf(err), err.Error())), nil
		}
	}
	if f.Env.SessionID.Present() && refusedWhenClosed(method) && ll.led.IsClosed(wire.SessionIDOf(f)) {
		return answer(proxy.ErrorResponse(f.Env.ID, proxy.CodeSessionClosed, closedMessage(method, wire.SessionIDOf(f)))), nil
	}
	if emulated(&f.Env, ll.life) {
		// The emulation, next, decides it, and holds it here if it must
		// wait: a stale session is reopened its own way, not rebuilt first.
		return proxy.Verdict{}, nil
	}
	if !ll.anyWait() && !(method == wire.Prompt && ll.ops.Fleet()) {
		return proxy.Verdict{}, nil // the common request: nothing waits, nothing to decode
	}
	sid := ""
	if f.Env.SessionID.Present() {
		sid = wire.SessionIDOf(f)
	}
	if !ll.MustWait(sid) {
		if method == wire.Prompt && ll.ops.Fleet() {
			// Off the relay's path: the lease is confirmed with the
			// database before the turn starts (holdAfter).
			return ll.holdAfter(f, sid, nil, 0), nil
		}
		return proxy.Verdict{}, nil
	}
	// The agent is restarting, or the session's native session is being
	// rebuilt or died with the agent: the request waits for it, then goes
	// on in its place in the stream.
	return ll.holdAfter(f, sid, nil, 0), nil
}

// Unsent keeps a client request whose write to the agent failed: the agent
// had died and never received it, so it is not answered with an error but
// waits, like a request that arrives while the agent restarts, and is sent
// to the restarted agent (DESIGN.md "While the agent's side is being
// rebuilt"). What the chain noted of it is taken back: it is not in flight,
// and a prompt's turn has not begun.
func (ll *Lifeline) Unsent(_ context.Context, f *proxy.Frame) proxy.Verdict {
	id := ledger.Key(f.Env.ID)
	sid := ""
	if f.Env.SessionID.Present() {
		sid = wire.SessionIDOf(f)
	}
	prompt := f.Env.MethodIs(wire.Prompt)
	// The agent's exit may not be noticed yet: then the request waits for
	// the next agent, not for the one that is gone.
	gen := ll.life.Gen()
	if ll.life.Phase() == life.Up {
		gen++
	}
	ll.led.Update(func(f *ledger.Flight) { f.Unsent(id, sid, prompt) })
	if prompt && sid != "" {
		ll.ops.TakeBack(sid)
	}
	// The relay has this frame's place: nothing after it was written.
	return ll.holdAfter(f, sid, nil, gen)
}

// ChunkPolicy: the lifeline claims a chunk only while a replay is kept
// from the client.
func (ll *Lifeline) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Gate: ll.gate} }

// A closed session stays closed on every agent: on one without
// session/close the sidecar answered the close, and the agent still holds
// the session and would run a prompt on it. What would use the session or
// change it is refused until the client's own load or resume reopens it;
// what only reads the record (status, a fork of it) and what ends it
// (close again, delete) go on.
func refusedWhenClosed(method string) bool {
	switch method {
	case wire.Prompt, wire.SetMode, wire.SetModel, wire.SetConfigOption,
		wire.ExtReset, wire.ExtRollback, wire.ExtRestoreOriginal, wire.ExtAcceptConfig, wire.ExtAgent:
		return true
	}
	return false
}

// closedMessage is the error a request on a closed session gets: what
// happened and the way out.
func closedMessage(method, sid string) string {
	return "acp-sidecar: session " + sid + " is closed, so its " + method + " was not run; session/load or session/resume reopens it"
}

// anyWait says whether any request may have to wait now: the agent is
// restarting, or some session is stale or being rebuilt.
func (ll *Lifeline) anyWait() bool {
	return ll.life.Phase() == life.Restarting || ll.led.AnyStale() || ll.led.AnyBusy()
}
