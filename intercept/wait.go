package intercept

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// While the agent's side is being rebuilt, the client waits (DESIGN.md):
// a client request that arrives while the agent restarts, or while its
// session is rebuilt or stale, keeps its place in the stream and waits for
// the session to be ready. Then it takes the rest of the chain as if it had
// just arrived, towards the rebuilt native session. Past --hold-timeout, or
// once the agent will not be restarted, it gets an error that says why.

// DefaultHoldTimeout bounds how long a client request waits for a restarting
// agent or a rebuild. It covers the restart's backoff, a slow agent's start
// (opencode takes about 2 s, claude about 1 s on two loaded cores) and a
// rebuild's calls, with room for a loaded machine.
const DefaultHoldTimeout = 60 * time.Second

// signal wakes everyone who waits for a change of the agent's phase or of a
// session's rebuild. A waiter takes the channel before it looks at the
// state, so a change between the look and the wait is never missed.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

// changed is closed at the next fire.
func (s *signal) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

// waiter is one client request held until its session is ready. Waiters
// leave the room in arrival order: each goes on only after the one before
// it, so the record sees them in the order the client sent them.
type waiter struct {
	id     []byte
	sid    string
	prompt bool
	// rebuild: a stale session is rebuilt before the request goes on;
	// else the request waits only for the agent and for running rebuilds.
	rebuild bool
	// minGen: the request waits for an agent of at least this life (one
	// whose predecessor never received it).
	minGen uint64
	cancel chan struct{} // closed by a session/cancel for this waiting prompt
	prev   <-chan struct{}
	done   chan struct{} // closed when this waiter has gone on or given up
}

// room is the waiters in arrival order.
type room struct {
	mu   sync.Mutex
	list []*waiter
	last <-chan struct{} // the done of the newest waiter
}

func (rm *room) enter(id []byte, sid string, prompt bool) *waiter {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	w := &waiter{id: id, sid: sid, prompt: prompt, cancel: make(chan struct{}), prev: rm.last, done: make(chan struct{})}
	if w.prev == nil {
		closed := make(chan struct{})
		close(closed)
		w.prev = closed
	}
	rm.list = append(rm.list, w)
	rm.last = w.done
	return w
}

func (rm *room) leave(w *waiter) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	for i, x := range rm.list {
		if x == w {
			rm.list = append(rm.list[:i], rm.list[i+1:]...)
			break
		}
	}
}

// cancelPrompts takes the waiting prompts of sid out of the queue and
// reports whether there were any.
func (rm *room) cancelPrompts(sid string) bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	found := false
	for _, w := range rm.list {
		if w.prompt && w.sid == sid {
			select {
			case <-w.cancel:
			default:
				close(w.cancel)
			}
			found = true
		}
	}
	return found
}

func (rm *room) waiting() bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return len(rm.list) > 0
}

// errCancelled ends the wait of a prompt the client cancelled.
var errCancelled = errors.New("cancelled while waiting")

// watch waits on the agent's life, for a held request and a rebuild alike.
// It reads the life and is woken by ready; it changes neither.
type watch struct {
	life    *life
	ready   *signal
	quit    <-chan struct{} // closed when the recorder closes: nobody waits any longer
	timeout time.Duration   // --hold-timeout
}

// awaitAgent waits, after the agent died under a rebuild that began in
// generation gen, until a restarted agent is up.
func (wt *watch) awaitAgent(ctx context.Context, gen uint64) error {
	return wt.awaitUp(ctx, func() bool { return wt.life.gen.Load() != gen })
}

// awaitUp waits until the agent is up and also holds.
func (wt *watch) awaitUp(ctx context.Context, also func() bool) error {
	deadline := time.NewTimer(wt.timeout)
	defer deadline.Stop()
	for {
		changed := wt.ready.changed()
		switch {
		case wt.life.get() == phaseDead:
			return wt.deadError()
		case wt.life.get() == phaseUp && also():
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("the agent exited during the rebuild and was not back within %s", wt.timeout)
		case <-wt.quit:
			return errors.New("the agent exited during the rebuild, and acp-sidecar is shutting down")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (wt *watch) deadError() error {
	wt.life.mu.Lock()
	why := wt.life.lastExit
	wt.life.mu.Unlock()
	return refuse(proxy.CodeAgentGone, "acp-sidecar: the agent keeps exiting (%s), so it is no longer restarted. Close this session and check the agent.", why)
}

func (wt *watch) timeoutError() error {
	what := "the session to be rebuilt"
	if wt.life.get() == phaseRestarting {
		what = "the agent to restart"
	}
	return refuse(proxy.CodeAgentGone, "acp-sidecar: waited %s for %s; the request was not sent. Your session was kept: send it again, and check the agent if this repeats.", wt.timeout, what)
}

// anyWait says whether any request may have to wait now: the agent is
// restarting, or some session is stale or being rebuilt.
func (ll *lifeline) anyWait() bool {
	return ll.life.get() == phaseRestarting || ll.t.anyStale.Load() || ll.t.busyN.Load() > 0
}

// mustWait says whether a client request has to wait: the agent is
// restarting, or the request's session is being rebuilt or lost its native
// session with the agent. It costs two atomic loads while nothing is wrong.
func (ll *lifeline) mustWait(sid string) bool {
	if ll.life.get() == phaseRestarting {
		return true
	}
	if sid == "" {
		return false
	}
	return ll.t.isStale(sid) || ll.t.isBusy(sid)
}

// waited is a held client request, copied off the relay's buffer.
type waited struct {
	method, sid string
	id, raw     []byte
}

// A decider takes a held request on once its session is ready, and says
// what goes to the agent and what back to the client.
type decider func(ctx context.Context, q waited) proxy.Decision

// hold keeps a client request's place and lets it go on once its session
// is ready: through decide when set (a load, resume or list, decided only
// then), else through the rest of the chain. It answers the request itself
// when the wait ends otherwise.
func (ll *lifeline) hold(f *proxy.Frame, sid string, decide decider) proxy.Verdict {
	return ll.holdAfter(f, sid, decide, 0)
}

// holdAfter is hold for a request that must wait for an agent of life
// minGen or later. The relay keeps the place and owns the goroutine that
// waits (proxy.Hold); the waiter joins the room now, in arrival order.
func (ll *lifeline) holdAfter(f *proxy.Frame, sid string, decide decider, minGen uint64) proxy.Verdict {
	id, raw, method := append([]byte(nil), f.Env.ID...), append([]byte(nil), f.Raw...), string(f.Env.Method)
	w := ll.room.enter(id, sid, f.Env.MethodIs(wire.Prompt))
	// A held load, resume or list is decided by the sidecar, which
	// rebuilds a stale session its own way (reopen).
	w.rebuild = decide == nil
	w.minGen = minGen
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
		defer close(w.done)
		err := ll.awaitReady(ctx, w)
		<-w.prev
		ll.room.leave(w)
		switch {
		case errors.Is(err, errCancelled):
			return answerWith(wire.Response(id, []byte(`{"stopReason":"cancelled"}`)))
		case err != nil:
			return answerWith(proxy.ErrorResponse(id, errorCode(err), err.Error()))
		case decide != nil:
			return decide(ctx, waited{method: method, sid: sid, id: id, raw: raw})
		default:
			return ll.rest(ctx, proxy.ClientToAgent, raw)
		}
	}}
}

// answerWith is the decision to answer a frame with lines.
func answerWith(lines ...[]byte) proxy.Decision { return proxy.Decision{Answer: lines} }

// awaitReady waits until the agent is up and w's session is neither being
// rebuilt nor stale. A stale session is rebuilt here, by the first waiter
// that finds it so; the others wait for that rebuild.
func (ll *lifeline) awaitReady(ctx context.Context, w *waiter) error {
	wt := ll.watch
	deadline := time.NewTimer(wt.timeout)
	defer deadline.Stop()
	for {
		changed := wt.ready.changed()
		switch ll.life.get() {
		case phaseDead:
			return wt.deadError()
		case phaseUp:
			if ll.life.gen.Load() < w.minGen {
				break // the dead agent's exit is not noticed yet
			}
			if w.sid == "" || !ll.t.isBusy(w.sid) && (!w.rebuild || !ll.t.isStale(w.sid)) {
				return nil
			}
			if !ll.t.isBusy(w.sid) {
				err := ll.rec.Recover(ctx, w.sid)
				var e *Error
				switch {
				case err == nil:
					continue
				case errors.As(err, &e) && e.Code == proxy.CodeBusy:
					// Another rebuild took the session first: wait for it.
				default:
					return refuse(proxy.CodeAgentGone, "acp-sidecar: could not rebuild the session after the agent exited: %v", err)
				}
			}
		}
		select {
		case <-changed:
		case <-w.cancel:
			return errCancelled
		case <-deadline.C:
			return wt.timeoutError()
		case <-wt.quit:
			return refuse(proxy.CodeAgentGone, "acp-sidecar is shutting down; the request was not sent")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// send writes a frame of the sidecar's own; a failure means the client is
// gone, and there is nobody left to tell.
func (r *Recorder) send(dir proxy.Direction, line []byte) {
	if err := r.sc.Send(dir, line); err != nil {
		r.log.Debug("send", "dir", dir.String(), "err", err)
	}
}
