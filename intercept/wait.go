package intercept

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
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

// errCancelled ends the wait of a prompt the client cancelled.
var errCancelled = errors.New("cancelled while waiting")

// watch waits on the agent's life, for a held request and a rebuild alike.
// It reads the life and is woken by ready; it changes neither.
type watch struct {
	life    *life.Life
	ready   *life.Signal
	quit    <-chan struct{} // closed when the recorder closes: nobody waits any longer
	timeout time.Duration   // --hold-timeout
}

// awaitAgent waits, after the agent died under a rebuild that began in
// generation gen, until a restarted agent is up.
func (wt *watch) awaitAgent(ctx context.Context, gen uint64) error {
	return wt.awaitUp(ctx, func() bool { return wt.life.Gen() != gen })
}

// awaitUp waits until the agent is up and also holds.
func (wt *watch) awaitUp(ctx context.Context, also func() bool) error {
	deadline := time.NewTimer(wt.timeout)
	defer deadline.Stop()
	for {
		changed := wt.ready.Changed()
		switch {
		case wt.life.Phase() == life.Dead:
			return wt.deadError()
		case wt.life.Phase() == life.Up && also():
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
	why := wt.life.LastExit()
	return refuse(proxy.CodeAgentGone, "acp-sidecar: the agent keeps exiting (%s), so it is no longer restarted. Close this session and check the agent.", why)
}

func (wt *watch) timeoutError() error {
	what := "the session to be rebuilt"
	if wt.life.Phase() == life.Restarting {
		what = "the agent to restart"
	}
	return refuse(proxy.CodeAgentGone, "acp-sidecar: waited %s for %s; the request was not sent. Your session was kept: send it again, and check the agent if this repeats.", wt.timeout, what)
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
	// A held load, resume or list is decided by the sidecar, which
	// rebuilds a stale session its own way (reopen).
	w := &ledger.Waiter{ID: id, Session: sid, Prompt: f.Env.MethodIs(wire.Prompt), Rebuild: decide == nil, MinLife: minGen}
	ll.led.Update(func(f *ledger.Flight) { f.Enter(w) })
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
		ll.led.Update(func(f *ledger.Flight) { f.Leave(w) })
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
// rebuilt nor stale, and returns the life of the agent it found up. A stale
// session is rebuilt here, by the first waiter that finds it so; the others
// wait for that rebuild.
func (ll *lifeline) awaitReady(ctx context.Context, w *ledger.Waiter) (uint64, error) {
	wt := ll.watch
	deadline := time.NewTimer(wt.timeout)
	defer deadline.Stop()
	for {
		changed := wt.ready.Changed()
		switch ll.life.Phase() {
		case life.Dead:
			return 0, wt.deadError()
		case life.Up:
			if ll.life.Gen() < w.MinLife {
				break // the dead agent's exit is not noticed yet
			}
			if w.Session == "" || !ll.led.IsBusy(w.Session) && (!w.Rebuild || !ll.led.IsStale(w.Session)) {
				return ll.life.Gen(), nil
			}
			if !ll.led.IsBusy(w.Session) {
				err := ll.rec.Recover(ctx, w.Session)
				var e *Error
				switch {
				case err == nil:
					continue
				case errors.As(err, &e) && e.Code == proxy.CodeBusy:
					// Another rebuild took the session first: wait for it.
				default:
					return 0, refuse(proxy.CodeAgentGone, "acp-sidecar: could not rebuild the session after the agent exited: %v", err)
				}
			}
		}
		select {
		case <-changed:
		case <-w.Cancel:
			return 0, errCancelled
		case <-deadline.C:
			return 0, wt.timeoutError()
		case <-wt.quit:
			return 0, refuse(proxy.CodeAgentGone, "acp-sidecar is shutting down; the request was not sent")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// sendOwn writes a frame of the sidecar's own; a failure means the client
// is gone, and there is nobody left to tell.
func sendOwn(sc Sidecar, log *slog.Logger, dir proxy.Direction, line []byte) {
	if err := sc.Send(dir, line); err != nil {
		log.Debug("send", "dir", dir.String(), "err", err)
	}
}
