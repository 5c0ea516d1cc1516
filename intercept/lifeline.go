package intercept

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// The agent's life as the client must not feel it (DESIGN.md "Rebuilding a
// native session", protocol.md §8 items 17-19): when the agent dies, what
// was pending gets a clear error and the sessions are kept; while it
// restarts, requests get a clear error; afterwards each session is rebuilt
// on its next request, before that request goes on.

// phase is where the agent's life stands.
type phase int32

const (
	phaseUp         phase = iota
	phaseRestarting       // the agent died; a new one is being started and initialized
	phaseDead             // the restart budget is used up
)

// lifeline is the first interceptor: it gates requests on the agent's
// phase, rebuilds stale sessions before their next request, answers
// session/load, resume and list where the agent cannot, and keeps the
// replay of a native load away from a client that already has it.
type lifeline struct {
	life  *life
	t     *table
	watch *watch
	gate  *chunkGate
	rec   lifelineRecord
	room  room        // the client requests waiting for their session (wait.go)
	rest  restOfChain // where a held request goes on (holder)
}

// lifelineRecord is what the lifeline asks of the record and its rebuilds.
type lifelineRecord interface {
	// Recover rebuilds a stale session before a held request goes on.
	Recover(ctx context.Context, sid string) error
	// reopen brings back a session the record knows for a client's load
	// or resume; listSessions answers a list from the record, which is
	// done when agentLists says the agent cannot.
	reopen(ctx context.Context, sid, method string) ([]byte, error)
	listSessions(ctx context.Context, id, raw []byte) []byte
	// agentCaps is what the agent said it can do.
	agentCaps() agentCaps
	// closeHere closes a session the agent cannot close: it lacks
	// session/close, or the session's native session died with it.
	closeHere(ctx context.Context, sid string) error
	// deleteHere forgets a session for an agent without session/delete.
	deleteHere(ctx context.Context, sid string) error
	// forkHere forks a session for an agent without session/fork, and
	// returns the fork's session/fork result.
	forkHere(ctx context.Context, parent string) (child string, result []byte, err error)
	// takeBack forgets what the record noted of a client request the
	// agent never received.
	takeBack(id, sid string, prompt bool)
}

func (ll *lifeline) goOnWith(rest restOfChain) { ll.rest = rest }

// tracker is the last interceptor: it notes the client requests that really
// go to the agent, so they can be answered if it dies, and the agent's
// requests, whose late answers must not reach its successor.
type tracker struct{ l *life }

// life is the shared state of lifeline and tracker.
type life struct {
	phase    atomic.Int32
	gen      atomic.Uint64 // the agent's lives: one more at each exit
	suppress atomic.Int32  // the sidecar's own calls in flight whose updates are kept from the client

	mu          sync.Mutex
	inflight    map[string]string // client request id token -> method
	agentReqs   map[string]bool   // agent request ids awaiting the client
	staleAgent  map[string]bool   // agent request ids of a dead agent
	suppressing map[string]hush   // native ids the sidecar loads or resumes, and what is kept back
	unsent      map[string]bool   // client ids whose prompt the dead agent never received
	lastExit    string
}

func newLife() *life {
	return &life{inflight: map[string]string{}, agentReqs: map[string]bool{}, staleAgent: map[string]bool{}, suppressing: map[string]hush{}, unsent: map[string]bool{}}
}

func (l *life) get() phase { return phase(l.phase.Load()) }

// replaying says whether some native load's replay is being kept from
// the client.
func (l *life) replaying() bool { return l.suppress.Load() > 0 }

// A hush is what of a native session's updates the client does not see
// while one of the sidecar's own calls runs on it.
type hush int

const (
	hushAll      hush = iota + 1 // a load's replay: the client has the history
	hushMessages                 // message and thought chunks: the agent's notes on a resume
	hushConfig                   // config reports: a restore under a held response reports its end itself
)

// hushes says whether h keeps the agent's update f from the client.
func (h hush) hushes(f *proxy.Frame) bool {
	switch h {
	case hushAll:
		return true
	case hushMessages:
		return isChunk(f.Dir, &f.Env)
	case hushConfig:
		u := string(f.Env.Update)
		return u == "config_option_update" || u == "current_mode_update"
	}
	return false
}

// hush keeps h of native's updates from the client until done is called.
func (l *life) hush(native string, h hush) (done func()) {
	l.mu.Lock()
	l.suppressing[native] = h
	l.mu.Unlock()
	l.suppress.Add(1)
	return func() {
		l.mu.Lock()
		delete(l.suppressing, native)
		l.mu.Unlock()
		l.suppress.Add(-1)
	}
}

// Claims: client requests while the agent is not up, or when some session
// is stale or a request may need emulation; agent responses (to forget
// them); client responses to a dead agent's requests; the replay of a
// native load the sidecar makes.
func (ll *lifeline) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	l := ll.life
	switch {
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindRequest:
		return true
	case dir == proxy.AgentToClient && env.Kind == proxy.KindResponse:
		return true
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindResponse:
		return true
	case dir == proxy.AgentToClient && env.Kind == proxy.KindNotification:
		return l.replaying() && env.SessionID.Present()
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindNotification:
		return env.MethodIs(wire.Cancel) && ll.room.waiting()
	}
	return false
}

// Intercept gates, holds or answers.
func (ll *lifeline) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	l := ll.life
	id := string(f.Env.ID)
	switch {
	case f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindResponse:
		l.mu.Lock()
		delete(l.inflight, id)
		l.mu.Unlock()
		return proxy.Verdict{}, nil
	case f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindResponse:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.staleAgent[id] {
			delete(l.staleAgent, id)
			return proxy.Verdict{Do: proxy.Drop}, nil // its asker died; nobody waits
		}
		delete(l.agentReqs, id)
		return proxy.Verdict{}, nil
	case f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindNotification:
		// A cancel for a prompt that waits takes it out of the queue; the
		// prompt is answered cancelled, and the agent, which never had
		// it, is not told.
		if ll.room.cancelPrompts(wire.SessionIDOf(f)) {
			return proxy.Verdict{Do: proxy.Drop}, nil
		}
		return proxy.Verdict{}, nil
	case f.Dir == proxy.AgentToClient:
		sid := wire.SessionIDOf(f)
		l.mu.Lock()
		defer l.mu.Unlock()
		if h := l.suppressing[sid]; f.Env.MethodIs(wire.Update) && h.hushes(f) {
			return proxy.Verdict{Do: proxy.Drop}, nil // the client has this history, or it is about a resume it did not ask for
		}
		return proxy.Verdict{}, nil
	}
	// A client request.
	if l.get() == phaseDead {
		return answer(proxy.ErrorResponse(f.Env.ID, proxy.CodeAgentGone, ll.watch.deadError().Error())), nil
	}
	method := string(f.Env.Method)
	if method == wire.SessionClose && f.Env.SessionID.Present() {
		return ll.closing(f, wire.SessionIDOf(f)), nil
	}
	if method == wire.SessionDelete && f.Env.SessionID.Present() {
		return ll.deleting(f, wire.SessionIDOf(f)), nil
	}
	if method == wire.SessionFork && f.Env.SessionID.Present() && !ll.rec.agentCaps().fork {
		return ll.forking(f, wire.SessionIDOf(f)), nil
	}
	emulated := method == wire.SessionLoad || method == wire.SessionResume || method == wire.SessionList
	if !emulated && !ll.anyWait() {
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
		return proxy.Verdict{}, nil
	}
	// The agent is restarting, or the session's native session is being
	// rebuilt or died with the agent: the request waits for it, then goes
	// on in its place in the stream.
	return ll.hold(f, sid, nil), nil
}

// Unsent keeps a client request whose write to the agent failed: the agent
// had died and never received it, so it is not answered with an error but
// waits, like a request that arrives while the agent restarts, and is sent
// to the restarted agent (DESIGN.md "While the agent's side is being
// rebuilt"). What the chain noted of it is taken back: it is not in flight,
// and a prompt's turn has not begun.
func (ll *lifeline) Unsent(_ context.Context, f *proxy.Frame) proxy.Verdict {
	l := ll.life
	id := string(f.Env.ID)
	sid := ""
	if f.Env.SessionID.Present() {
		sid = wire.SessionIDOf(f)
	}
	prompt := f.Env.MethodIs(wire.Prompt)
	// The agent's exit may not be noticed yet: then the request waits for
	// the next agent, not for the one that is gone.
	gen := l.gen.Load()
	if l.get() == phaseUp {
		gen++
	}
	l.mu.Lock()
	delete(l.inflight, id)
	if prompt && sid != "" {
		l.unsent[sid] = true
	}
	l.mu.Unlock()
	ll.rec.takeBack(id, sid, prompt)
	// The relay has this frame's place: nothing after it was written.
	return ll.holdAfter(f, sid, nil, gen)
}

// takeBack forgets what the record noted of a client request the agent
// never received: it awaits no response, and a prompt's turn has not
// begun.
func (r *Recorder) takeBack(id, sid string, prompt bool) {
	r.mu.Lock()
	if req := r.pending[id]; req != nil {
		delete(r.pending, id)
		if req.method == wire.Prompt && r.running.Load() > 0 {
			r.running.Add(-1)
		}
	}
	r.mu.Unlock()
	if prompt && sid != "" {
		r.enqueue(event{fn: func(ctx context.Context) { r.unbegin(ctx, sid) }})
	}
}

// unbegin takes back the turn of a prompt the agent never received: it
// will be recorded when the prompt is sent again. A handoff it carried is
// owed again.
func (r *Recorder) unbegin(ctx context.Context, sid string) {
	r.life.mu.Lock()
	delete(r.life.unsent, sid)
	r.life.mu.Unlock()
	s := r.sessions[sid]
	if s == nil || s.turn == nil || s.turn != &s.turns[len(s.turns)-1] {
		return
	}
	handoff := s.turn.HandoffDelivered
	r.takeAnswer(s.turn.NativeID)
	s.turns = s.turns[:len(s.turns)-1]
	s.turn = nil
	if handoff {
		s.rec.Handoff = nil
		r.arm(s)
		r.putSession(ctx, s)
	}
}

// Claims takes client requests and agent requests that made it through.
func (t tracker) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	return env.Kind == proxy.KindRequest
}

// Intercept notes the request.
func (t tracker) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	id := string(f.Env.ID)
	if f.Dir == proxy.ClientToAgent {
		t.l.inflight[id] = string(f.Env.Method)
	} else {
		t.l.agentReqs[id] = true
		delete(t.l.staleAgent, id) // the new agent reuses the id; its answer is wanted
	}
	return proxy.Verdict{}, nil
}

// claimsChunks: the tracker never claims a chunk (chunkScoped).
func (t tracker) claimsChunks() bool { return false }

// chunkGate: the lifeline claims a chunk only while a replay is kept from
// the client (chunkGated).
func (ll *lifeline) chunkGate() *chunkGate { return ll.gate }

// closing decides a client's session/close. It goes to the agent when the
// agent can close and the session's native session lives; else the
// sidecar closes the session itself and answers. Either way the session
// is never rebuilt for it: closing a session whose native session died
// with the agent rebuilds nothing.
func (ll *lifeline) closing(f *proxy.Frame, sid string) proxy.Verdict {
	if ll.rec.agentCaps().close && !ll.mustWait(sid) {
		return proxy.Verdict{} // the record marks it closed on the agent's answer
	}
	return ll.hold(f, sid, func(ctx context.Context, q waited) proxy.Decision {
		if ll.rec.agentCaps().close && !ll.t.isStale(sid) {
			return ll.rest(ctx, proxy.ClientToAgent, q.raw)
		}
		if err := ll.rec.closeHere(ctx, sid); err != nil {
			return answerWith(proxy.ErrorResponse(q.id, errorCode(err), err.Error()))
		}
		return answerWith(wire.Response(q.id, []byte("{}")))
	})
}

// forking decides a client's session/fork on an agent without one: the
// sidecar forks the session from the record (Recorder.Fork), answers with
// the fork's id and config, and sends its commands for the fork.
func (ll *lifeline) forking(f *proxy.Frame, parent string) proxy.Verdict {
	return ll.hold(f, parent, func(ctx context.Context, q waited) proxy.Decision {
		child, result, err := ll.rec.forkHere(ctx, parent)
		if err != nil {
			return answerWith(proxy.ErrorResponse(q.id, errorCode(err), err.Error()))
		}
		return answerWith(append([][]byte{wire.Response(q.id, result)}, ll.t.ownCommands(ll.t.nativeOf(child), child)...)...)
	})
}

// deleting decides a client's session/delete. It goes to the agent when the
// agent can delete (the record forgets the session once the agent has),
// else the sidecar forgets the session and answers. A session whose native
// session died with the agent is not rebuilt for it: real agents keep
// sessions on disk, so the delete still goes to the agent under the native
// id the session last had.
func (ll *lifeline) deleting(f *proxy.Frame, sid string) proxy.Verdict {
	if ll.rec.agentCaps().delete && !ll.mustWait(sid) {
		return proxy.Verdict{}
	}
	return ll.hold(f, sid, func(ctx context.Context, q waited) proxy.Decision {
		if ll.rec.agentCaps().delete {
			return ll.rest(ctx, proxy.ClientToAgent, q.raw)
		}
		if err := ll.rec.deleteHere(ctx, sid); err != nil {
			return answerWith(proxy.ErrorResponse(q.id, errorCode(err), err.Error()))
		}
		return answerWith(wire.Response(q.id, []byte("{}")))
	})
}
