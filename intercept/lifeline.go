package intercept

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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

// codeAgentGone answers requests the agent cannot take now.
const codeAgentGone = -32012

// lifeline is the first interceptor: it gates requests on the agent's
// phase, rebuilds stale sessions before their next request, answers
// session/load, resume and list where the agent cannot, and keeps the
// replay of a native load away from a client that already has it.
type lifeline struct {
	r *Recorder
}

// tracker is the last interceptor: it notes the client requests that really
// go to the agent, so they can be answered if it dies, and the agent's
// requests, whose late answers must not reach its successor.
type tracker struct{ l *life }

// life is the shared state of lifeline and tracker.
type life struct {
	phase    atomic.Int32
	suppress atomic.Int32 // native loads in flight whose replay is kept from the client

	mu          sync.Mutex
	inflight    map[string]string // client request id token -> method
	agentReqs   map[string]bool   // agent request ids awaiting the client
	staleAgent  map[string]bool   // agent request ids of a dead agent
	suppressing map[string]bool   // native ids being loaded by the sidecar
	lastExit    string
}

func newLife() *life {
	return &life{inflight: map[string]string{}, agentReqs: map[string]bool{}, staleAgent: map[string]bool{}, suppressing: map[string]bool{}}
}

func (l *life) get() phase { return phase(l.phase.Load()) }

// replaying says whether some native load's replay is being kept from
// the client.
func (l *life) replaying() bool { return l.suppress.Load() > 0 }

// Claims: client requests while the agent is not up, or when some session
// is stale or a request may need emulation; agent responses (to forget
// them); client responses to a dead agent's requests; the replay of a
// native load the sidecar makes.
func (ll lifeline) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	l := ll.r.life
	switch {
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindRequest:
		return true
	case dir == proxy.AgentToClient && env.Kind == proxy.KindResponse:
		return true
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindResponse:
		return true
	case dir == proxy.AgentToClient && env.Kind == proxy.KindNotification:
		return l.replaying() && env.SessionID.Present()
	}
	return false
}

// Intercept gates, holds or answers.
func (ll lifeline) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	r, l := ll.r, ll.r.life
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
	case f.Dir == proxy.AgentToClient:
		sid := sessionIDOf(f)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.suppressing[sid] && f.Env.MethodIs(mUpdate) {
			return proxy.Verdict{Do: proxy.Drop}, nil // the client has this history already
		}
		return proxy.Verdict{}, nil
	}
	// A client request.
	switch l.get() {
	case phaseRestarting:
		return answer(proxy.ErrorResponse(f.Env.ID, codeAgentGone, "acp-sidecar: the agent exited and is being restarted; your sessions were kept. Send the request again in a moment.")), nil
	case phaseDead:
		l.mu.Lock()
		why := l.lastExit
		l.mu.Unlock()
		return answer(proxy.ErrorResponse(f.Env.ID, codeAgentGone, "acp-sidecar: the agent keeps exiting ("+why+"), so it is no longer restarted. Close this session and check the agent.")), nil
	}
	method := string(f.Env.Method)
	switch method {
	case mSessionLoad, mSessionResume, mSessionList:
		if v, ok := ll.emulate(ctx, f, method); ok {
			return v, nil
		}
		return proxy.Verdict{}, nil
	}
	if !f.Env.SessionID.Present() || !r.t.anyStale.Load() {
		return proxy.Verdict{}, nil
	}
	sid := sessionIDOf(f)
	if !r.t.isStale(sid) {
		return proxy.Verdict{}, nil
	}
	// The session's native session died with the agent: rebuild it, then
	// let this request go on, in its place in the stream.
	release := r.sc.Hold(proxy.ClientToAgent)
	raw := append([]byte(nil), f.Raw...)
	r.spawn(func(ctx context.Context) {
		if err := r.Recover(ctx, sid); err != nil {
			r.log.Error("rebuild after the agent's exit failed", "session", sid, "err", err)
			r.sc.Send(proxy.AgentToClient, proxy.ErrorResponse(f.Env.ID, codeAgentGone, fmt.Sprintf("acp-sidecar: could not rebuild the session after the agent exited: %v", err)))
			release()
			return
		}
		release(r.reenter(ctx, raw)...)
	})
	return proxy.Verdict{Do: proxy.Drop}, nil
}

// reenter runs a held client frame through the rest of the chain (the
// sidecar's commands, the record, the id mapping) and returns what goes to
// the agent; an answer goes back to the client.
func (r *Recorder) reenter(ctx context.Context, raw []byte) [][]byte {
	env, err := proxy.Scan(raw)
	if err != nil {
		return nil
	}
	f := &proxy.Frame{Dir: proxy.ClientToAgent, Raw: raw, Env: env}
	v := r.rest.Frame(ctx, f)
	switch v.Do {
	case proxy.Pass:
		return [][]byte{raw}
	case proxy.Rewrite:
		return [][]byte{v.Line}
	case proxy.Answer:
		r.sc.Send(proxy.AgentToClient, v.Line)
	}
	return nil
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
