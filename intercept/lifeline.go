package intercept

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// The agent's life as the client must not feel it (DESIGN.md "Rebuilding a
// native session", protocol.md §8 items 17-19): when the agent dies, what
// was pending gets a clear error and the sessions are kept; while it
// restarts, requests get a clear error; afterwards each session is rebuilt
// on its next request, before that request goes on.

// lifeline is the first interceptor: it gates requests on the agent's
// phase, rebuilds stale sessions before their next request, answers
// session/load, resume and list where the agent cannot, and keeps the
// replay of a native load away from a client that already has it.
type lifeline struct {
	life  *life.Life
	led   *ledger.Ledger
	watch *rebuild.Watch
	gate  *ChunkGate
	rec   LifelineOps
	rest  restOfChain // where a held request goes on (holder)
	log   *slog.Logger
}

// LifelineOps is what the lifeline asks of the record and its rebuilds
// (*Sessions). Its methods but Recover are the package's own: a session
// operation that answers for the agent belongs beside the others.
type LifelineOps interface {
	// Recover rebuilds a stale session before a held request goes on.
	Recover(ctx context.Context, sid string) error
	// reopen brings back a session the record knows for a client's load
	// or resume; listSessions answers a list from the record, which is
	// done when agentLists says the agent cannot.
	reopen(ctx context.Context, sid, method string, raw []byte) ([]byte, error)
	listSessions(ctx context.Context, id, raw []byte) []byte
	// closeHere closes a session the agent cannot close: it lacks
	// session/close, or the session's native session died with it.
	closeHere(ctx context.Context, sid string) error
	// deleteHere forgets a session for an agent without session/delete.
	deleteHere(ctx context.Context, sid string) error
	// forkHere forks a session for an agent without session/fork, and
	// returns the fork's session/fork result.
	forkHere(ctx context.Context, parent string) (child string, result []byte, err error)
	// takeBack takes back the turn of a prompt the agent never received.
	takeBack(sid string)
	// again decides a client request again, whose error answer the
	// lifeline dropped (proxy.Relay.Again).
	again(ctx context.Context, line []byte) error
	// lost is the error for request f on a session another sidecar of a
	// fleet took over (nil while this one serves it).
	lost(f *proxy.Frame) error
	// fleet says whether sessions have leases; confirm then checks with
	// the database, before a prompt goes on, that the lease is still this
	// sidecar's.
	fleet() bool
	confirm(ctx context.Context, sid string) error
}

// NewLifeline builds the lifeline over the agent's life and the ledger it
// gates on, the watch it waits with, the gate that lets a held request's
// chunks through, and the session operations it asks to reopen, list,
// close, delete and fork where the agent cannot.
func NewLifeline(lf *life.Life, led *ledger.Ledger, watch *rebuild.Watch, gate *ChunkGate, rec LifelineOps, log *slog.Logger) Interceptor {
	return &lifeline{life: lf, led: led, watch: watch, gate: gate, rec: rec, log: log}
}

func (ll *lifeline) goOnWith(rest restOfChain) { ll.rest = rest }

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

// Claims: client requests while the agent is not up, or when some session
// is stale or a request may need emulation; agent responses (each request
// is answered once); client responses to a dead agent's requests; the replay of a
// native load the sidecar makes.
func (ll *lifeline) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
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

// Intercept gates, holds or answers.
func (ll *lifeline) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
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
		if err := ll.rec.lost(f); err != nil {
			return answer(proxy.ErrorResponse(f.Env.ID, wire.CodeOf(err), err.Error())), nil
		}
	}
	if f.Env.SessionID.Present() && refusedWhenClosed(method) && ll.led.IsClosed(wire.SessionIDOf(f)) {
		return answer(proxy.ErrorResponse(f.Env.ID, proxy.CodeSessionClosed, closedMessage(method, wire.SessionIDOf(f)))), nil
	}
	if method == wire.SessionClose && f.Env.SessionID.Present() {
		return ll.closing(f, wire.SessionIDOf(f)), nil
	}
	if method == wire.SessionDelete && f.Env.SessionID.Present() {
		return ll.deleting(f, wire.SessionIDOf(f)), nil
	}
	if method == wire.SessionFork && f.Env.SessionID.Present() && !ll.life.Caps().Fork {
		return ll.forking(f, wire.SessionIDOf(f)), nil
	}
	emulated := method == wire.SessionLoad || method == wire.SessionResume || method == wire.SessionList
	if !emulated && !ll.anyWait() && !(method == wire.Prompt && ll.rec.fleet()) {
		return proxy.Verdict{}, nil // the common request: nothing waits, nothing to decode
	}
	sid := ""
	if f.Env.SessionID.Present() {
		sid = wire.SessionIDOf(f)
	}
	if emulated {
		if !ll.mustWait(sid) && !ll.emulates(method, sid) {
			return proxy.Verdict{}, nil
		}
		// The decision needs the recorder, off the relay's path.
		return ll.hold(f, sid, ll.emulate), nil
	}
	if !ll.mustWait(sid) {
		if method == wire.Prompt && ll.rec.fleet() {
			// Off the relay's path: the lease is confirmed with the
			// database before the turn starts (holdAfter).
			return ll.hold(f, sid, nil), nil
		}
		return proxy.Verdict{}, nil
	}
	// The agent is restarting, or the session's native session is being
	// rebuilt or died with the agent: the request waits for it, then goes
	// on in its place in the stream.
	return ll.hold(f, sid, nil), nil
}

// An agent may accept a resume of a session it cannot serve: codex-acp
// 2.6.0, its thread gone with CODEX_HOME/sessions, answers session/resume
// with success and the next prompt with -32603 "thread not found". The
// first prompt after a resume proves it (ledger Flight.Resumed): when the
// agent fails that prompt so, the resume is taken for a failed one, the
// session is rebuilt by the next rung of the ladder, which resumes that
// native session no more, and the prompt goes to the rebuilt session, once,
// with its handoff. The client sees one answer, the rebuilt session's.

// proving marks prompt f, the first since its session's native session
// was resumed, as the one that proves the resume: it keeps the prompt as
// the client sent it, to send it again.
func (ll *lifeline) proving(id, sid string, raw []byte) {
	raw = bytes.Clone(raw)
	ll.led.Update(func(fl *ledger.Flight) {
		if fl.Sessions.Proving(sid) {
			fl.Requests.Note(id, wire.Prompt, sid).Probe = raw
		}
	})
}

// resumeUnserved says whether an error response to the first prompt after
// a resume says the agent has no such session after all: -32002, or an
// internal error that says so ("thread not found", codex-acp 2.6.0).
func resumeUnserved(raw []byte) bool {
	e := wire.Member(raw, "error")
	switch wire.ErrorCodeOf(e) {
	case proxy.CodeResourceNotFound:
		return true
	case proxy.CodeInternalError:
		return bytes.Contains(bytes.ToLower(e), []byte("not found"))
	}
	return false
}

// unserved drops the agent's error to q, the first prompt after a resume
// the agent could not serve, and sends q again, to the session rebuilt
// without that resume: the client gets the rebuilt session's answer, and
// the agent's error never.
func (ll *lifeline) unserved(ctx context.Context, q ledger.Request, f *proxy.Frame) proxy.Verdict {
	sid := q.Session
	native := ll.led.NativeOf(sid)
	ll.log.Warn("the agent accepted the session's resume and cannot serve it; rebuilding the session and sending the prompt again", "session", sid, "native", native, "error", string(wire.Member(f.Raw, "error")))
	ll.led.Update(func(fl *ledger.Flight) { fl.Sessions.ResumeLied(sid, native) })
	// Sent again as a request the agent never took, its turn is taken
	// back (Unsent) and recorded when it goes.
	if err := ll.rec.again(ctx, q.Probe); err != nil {
		ll.log.Error("the prompt could not be sent again; the agent's error goes to the client", "session", sid, "err", err)
		return proxy.Verdict{}
	}
	return proxy.Verdict{Do: proxy.Drop}
}

// Again takes a client request again whose error answer unserved
// dropped: the agent never ran it on the session it named. Its turn is
// taken back, and it waits, as a request that comes while its session is
// rebuilt waits, for the agent that is up now.
func (ll *lifeline) Again(_ context.Context, f *proxy.Frame) proxy.Verdict {
	sid := wire.SessionIDOf(f)
	if f.Env.MethodIs(wire.Prompt) && sid != "" {
		ll.led.Update(func(fl *ledger.Flight) { fl.Unsent(ledger.Key(f.Env.ID), sid, true) })
		ll.rec.takeBack(sid)
	}
	return ll.holdAfter(f, sid, nil, ll.life.Gen())
}

// Unsent keeps a client request whose write to the agent failed: the agent
// had died and never received it, so it is not answered with an error but
// waits, like a request that arrives while the agent restarts, and is sent
// to the restarted agent (DESIGN.md "While the agent's side is being
// rebuilt"). What the chain noted of it is taken back: it is not in flight,
// and a prompt's turn has not begun.
func (ll *lifeline) Unsent(_ context.Context, f *proxy.Frame) proxy.Verdict {
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
		ll.rec.takeBack(sid)
	}
	// The relay has this frame's place: nothing after it was written.
	return ll.holdAfter(f, sid, nil, gen)
}

// ChunkPolicy: the lifeline claims a chunk only while a replay is kept
// from the client.
func (ll *lifeline) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Gate: ll.gate} }

// closing decides a client's session/close. It goes to the agent when the
// agent can close and the session's native session lives; else the
// sidecar closes the session itself and answers. Either way the session
// is never rebuilt for it: closing a session whose native session died
// with the agent rebuilds nothing.
func (ll *lifeline) closing(f *proxy.Frame, sid string) proxy.Verdict {
	if ll.life.Caps().Close && !ll.mustWait(sid) {
		return proxy.Verdict{} // the record marks it closed on the agent's answer
	}
	return ll.hold(f, sid, func(ctx context.Context, q waited) proxy.Decision {
		if ll.life.Caps().Close && !ll.led.IsStale(sid) {
			return ll.rest(ctx, proxy.ClientToAgent, q.raw)
		}
		if err := ll.rec.closeHere(ctx, sid); err != nil {
			return answerWith(proxy.ErrorResponse(q.id, wire.CodeOf(err), err.Error()))
		}
		return answerWith(wire.Response(q.id, []byte("{}")))
	})
}

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

// forking decides a client's session/fork on an agent without one: the
// sidecar forks the session from the record (Sessions.Fork), answers with
// the fork's id and config, and sends its commands for the fork.
func (ll *lifeline) forking(f *proxy.Frame, parent string) proxy.Verdict {
	return ll.hold(f, parent, func(ctx context.Context, q waited) proxy.Decision {
		child, result, err := ll.rec.forkHere(ctx, parent)
		if err != nil {
			return answerWith(proxy.ErrorResponse(q.id, wire.CodeOf(err), err.Error()))
		}
		return answerWith(append([][]byte{wire.Response(q.id, result)}, ownCommands(ll.led, ll.life, ll.led.NativeOf(child), child)...)...)
	})
}

// deleting decides a client's session/delete. It goes to the agent when the
// agent can delete (the record forgets the session once the agent has),
// else the sidecar forgets the session and answers. A session whose native
// session died with the agent is not rebuilt for it: real agents keep
// sessions on disk, so the delete still goes to the agent under the native
// id the session last had.
func (ll *lifeline) deleting(f *proxy.Frame, sid string) proxy.Verdict {
	if ll.life.Caps().Delete && !ll.mustWait(sid) {
		return proxy.Verdict{}
	}
	return ll.hold(f, sid, func(ctx context.Context, q waited) proxy.Decision {
		if ll.life.Caps().Delete {
			return ll.rest(ctx, proxy.ClientToAgent, q.raw)
		}
		if err := ll.rec.deleteHere(ctx, sid); err != nil {
			return answerWith(proxy.ErrorResponse(q.id, wire.CodeOf(err), err.Error()))
		}
		return answerWith(wire.Response(q.id, []byte("{}")))
	})
}

// anyWait says whether any request may have to wait now: the agent is
// restarting, or some session is stale or being rebuilt.
func (ll *lifeline) anyWait() bool {
	return ll.life.Phase() == life.Restarting || ll.led.AnyStale() || ll.led.AnyBusy()
}

// mustWait says whether a client request has to wait: the agent is
// restarting, or the request's session is being rebuilt or lost its native
// session with the agent. It costs two atomic loads while nothing is wrong.
func (ll *lifeline) mustWait(sid string) bool {
	if ll.life.Phase() == life.Restarting {
		return true
	}
	if sid == "" {
		return false
	}
	return ll.led.IsStale(sid) || ll.led.IsBusy(sid)
}

// While the agent's side is being rebuilt, the client waits (DESIGN.md):
// a client request that arrives while the agent restarts, or while its
// session is rebuilt or stale, keeps its place in the stream and waits for
// the session to be ready. Then it takes the rest of the chain as if it had
// just arrived, towards the rebuilt native session. Past --hold-timeout, or
// once the agent will not be restarted, it gets an error that says why.

// hold keeps a client request's place and lets it go on once its session
// is ready: through decide when set (a load, resume or list, decided only
// then), else through the rest of the chain. It answers the request itself
// when the wait ends otherwise.
func (ll *lifeline) hold(f *proxy.Frame, sid string, decide decider) proxy.Verdict {
	return ll.holdAfter(f, sid, decide, 0)
}

// holdAfter is hold for a request that must wait for an agent of life
// minGen or later. The relay keeps the place and owns the goroutine that
// waits (proxy.Hold); the waiter joins the ledger's queue now, in arrival order.
func (ll *lifeline) holdAfter(f *proxy.Frame, sid string, decide decider, minGen uint64) proxy.Verdict {
	id, raw, method := append([]byte(nil), f.Env.ID...), append([]byte(nil), f.Raw...), string(f.Env.Method)
	// A held load, resume or list is decided by the sidecar, which
	// rebuilds a stale session its own way (reopen).
	w := &ledger.Waiter{ID: id, Session: sid, Prompt: f.Env.MethodIs(wire.Prompt), Rebuild: decide == nil, MinLife: minGen}
	ll.led.Update(func(f *ledger.Flight) { f.Waiters.Enter(w) })
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
		defer close(w.Done)
		gen, err := ll.awaitReady(ctx, w)
		<-w.Prev
		// The readiness was the agent's of life gen. If it died while this
		// request waited for the one before it, the request would go to
		// the dead agent's failed stdin and be lost unanswered, or to its
		// successor ahead of the sidecar's initialize (codex-acp answers
		// that with -32600): it waits again, for the successor.
		for err == nil && (ll.life.Phase() != life.Up || ll.life.Gen() != gen) {
			w.MinLife = gen + 1
			gen, err = ll.awaitReady(ctx, w)
		}
		ll.led.Update(func(f *ledger.Flight) { f.Waiters.Leave(w) })
		switch {
		case errors.Is(err, errCancelled) && wire.Version(ll.life.Caps().Protocol) >= wire.V2:
			// Never inserted, so there is no messageId to accept it with:
			// v2 answers a prompt cancelled before insertion with an error.
			return answerWith(proxy.ErrorResponse(id, proxy.CodeRequestCancelled, "Request cancelled: the prompt was cancelled while it waited for the agent"))
		case errors.Is(err, errCancelled):
			return answerWith(wire.Response(id, []byte(`{"stopReason":"cancelled"}`)))
		case err != nil:
			return answerWith(proxy.ErrorResponse(id, wire.CodeOf(err), err.Error()))
		case decide != nil:
			return decide(ctx, waited{method: method, sid: sid, id: id, raw: raw})
		}
		if method == wire.Prompt {
			if err := ll.rec.confirm(ctx, sid); err != nil {
				return answerWith(proxy.ErrorResponse(id, wire.CodeOf(err), err.Error()))
			}
			if ll.led.Proving() {
				// The wait may have been a rebuild that resumed the session.
				ll.proving(ledger.Key(id), sid, raw)
			}
		}
		return ll.rest(ctx, proxy.ClientToAgent, raw)
	}}
}

// awaitReady waits until the agent is up and w's session is neither being
// rebuilt nor stale, and returns the life of the agent it found up. A stale
// session is rebuilt here, by the first waiter that finds it so; the others
// wait for that rebuild.
func (ll *lifeline) awaitReady(ctx context.Context, w *ledger.Waiter) (uint64, error) {
	wt := ll.watch
	deadline := time.NewTimer(wt.Timeout)
	defer deadline.Stop()
	for {
		changed := wt.Ready.Changed()
		switch ll.life.Phase() {
		case life.Dead:
			return 0, wt.DeadError()
		case life.Up:
			if ll.life.Gen() < w.MinLife {
				break // the dead agent's exit is not noticed yet
			}
			if w.Session == "" || !ll.led.IsBusy(w.Session) && (!w.Rebuild || !ll.led.IsStale(w.Session)) {
				return ll.life.Gen(), nil
			}
			if !ll.led.IsBusy(w.Session) {
				err := ll.rec.Recover(ctx, w.Session)
				var e *wire.Error
				switch {
				case err == nil:
					continue
				case errors.As(err, &e) && e.Code == proxy.CodeBusy:
					// Another rebuild took the session first: wait for it.
				default:
					return 0, wire.Refuse(proxy.CodeAgentGone, "acp-sidecar: could not rebuild the session after the agent exited: %v", err)
				}
			}
		}
		select {
		case <-changed:
		case <-w.Cancel:
			return 0, errCancelled
		case <-deadline.C:
			return 0, wt.TimeoutError()
		case <-wt.Quit:
			return 0, wire.Refuse(proxy.CodeAgentGone, "acp-sidecar is shutting down; the request was not sent")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// emulates says whether the sidecar decides a client's session/load,
// session/resume or session/list itself: a load or resume of a session the
// record may know is rebuilt (natively where the agent can, else emulated),
// and a list the agent cannot make is answered from the record.
func (ll *lifeline) emulates(method, sid string) bool {
	caps := ll.life.Caps()
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
func (ll *lifeline) emulate(ctx context.Context, q waited) proxy.Decision {
	if !ll.emulates(q.method, q.sid) {
		return ll.rest(ctx, proxy.ClientToAgent, q.raw)
	}
	if q.method == wire.SessionList {
		return answerWith(ll.rec.listSessions(ctx, q.id, q.raw))
	}
	line, err := ll.rec.reopen(ctx, q.sid, q.method, q.raw)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return ll.rest(ctx, proxy.ClientToAgent, q.raw) // not ours: the agent answers, with its own error if it must
	case err != nil:
		return answerWith(proxy.ErrorResponse(q.id, wire.CodeOf(err), err.Error()))
	case line == nil:
		return ll.rest(ctx, proxy.ClientToAgent, q.raw) // live here: the agent has it
	default:
		// The sidecar's commands follow, as after every open the client
		// makes, unless the agent sent its list during the reopen.
		return answerWith(append([][]byte{wire.Response(q.id, line)}, ownCommands(ll.led, ll.life, ll.led.NativeOf(q.sid), q.sid)...)...)
	}
}
