package intercept

import (
	"context"
	"errors"
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

var _ WaitingRoom = (*Lifeline)(nil)

// MustWait says whether a client request has to wait: the agent is
// restarting, or the request's session is being rebuilt or lost its native
// session with the agent. It costs two atomic loads while nothing is wrong.
func (ll *Lifeline) MustWait(sid string) bool {
	if ll.life.Phase() == life.Restarting {
		return true
	}
	if sid == "" {
		return false
	}
	return ll.led.IsStale(sid) || ll.led.IsBusy(sid)
}

// Hold keeps a client request's place until the agent is up and session
// sid is not being rebuilt, and then lets decide take it on; a stale
// session is not rebuilt for it, as decide reopens it its own way. It
// answers the request itself when the wait ends otherwise.
func (ll *Lifeline) Hold(f *proxy.Frame, sid string, decide Decider) proxy.Verdict {
	return ll.holdAfter(f, sid, decide, 0)
}

// holdAfter holds a request that must wait for an agent of life minGen or
// later, and lets it go on once its session is ready: through decide when
// set (Hold), else through the rest of the chain after a stale session is
// rebuilt. The relay keeps the place and owns the goroutine that waits
// (proxy.Hold); the waiter joins the ledger's queue now, in arrival order.
func (ll *Lifeline) holdAfter(f *proxy.Frame, sid string, decide Decider, minGen uint64) proxy.Verdict {
	id, raw, method := append([]byte(nil), f.Env.ID...), append([]byte(nil), f.Raw...), string(f.Env.Method)
	// A request with a decider (a load, resume or list, the emulation's) is
	// decided by the sidecar, which rebuilds a stale session its own way
	// (reopen).
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
			return decide(ctx, Held{Method: method, Session: sid, ID: id, Raw: raw})
		}
		if method == wire.Prompt {
			if err := ll.ops.Confirm(ctx, sid); err != nil {
				return answerWith(proxy.ErrorResponse(id, wire.CodeOf(err), err.Error()))
			}
			if ll.led.Proving() {
				// The wait may have been a rebuild that resumed the session.
				ll.proving(ledger.Key(id), sid, raw)
			}
		}
		// The lifeline has decided it: the emulation lets it pass.
		return ll.rest(wentOn(ctx, id), proxy.ClientToAgent, raw)
	}}
}

// awaitReady waits until the agent is up and w's session is neither being
// rebuilt nor stale, and returns the life of the agent it found up. A stale
// session is rebuilt here, by the first waiter that finds it so; the others
// wait for that rebuild.
func (ll *Lifeline) awaitReady(ctx context.Context, w *ledger.Waiter) (uint64, error) {
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
				err := ll.ops.Recover(ctx, w.Session)
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
