package intercept

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

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
	return wire.Refuse(proxy.CodeAgentGone, "acp-sidecar: the agent keeps exiting (%s), so it is no longer restarted. Close this session and check the agent.", why)
}

func (wt *watch) timeoutError() error {
	what := "the session to be rebuilt"
	if wt.life.Phase() == life.Restarting {
		what = "the agent to restart"
	}
	return wire.Refuse(proxy.CodeAgentGone, "acp-sidecar: waited %s for %s; the request was not sent. Your session was kept: send it again, and check the agent if this repeats.", wt.timeout, what)
}

// waited is a held client request, copied off the relay's buffer.
type waited struct {
	method, sid string
	id, raw     []byte
}

// A decider takes a held request on once its session is ready, and says
// what goes to the agent and what back to the client.
type decider func(ctx context.Context, q waited) proxy.Decision

// answerWith is the decision to answer a frame with lines.
func answerWith(lines ...[]byte) proxy.Decision { return proxy.Decision{Answer: lines} }

// sendOwn writes a frame of the sidecar's own; a failure means the client
// is gone, and there is nobody left to tell.
func sendOwn(sc Sidecar, log *slog.Logger, dir proxy.Direction, line []byte) {
	if err := sc.Send(dir, line); err != nil {
		log.Debug("send", "dir", dir.String(), "err", err)
	}
}
