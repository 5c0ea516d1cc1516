package rebuild

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

// Watch waits on the agent's life, for a held request and a rebuild alike.
// It reads the life and is woken by Ready; it changes neither.
type Watch struct {
	Life    *life.Life
	Ready   *life.Signal
	Quit    <-chan struct{} // closed when the sidecar stops: nobody waits any longer
	Timeout time.Duration   // --hold-timeout
}

// awaitAgent waits, after the agent died under a rebuild that began in
// generation gen, until a restarted agent is up.
func (wt *Watch) awaitAgent(ctx context.Context, gen uint64) error {
	return wt.awaitUp(ctx, func() bool { return wt.Life.Gen() != gen })
}

// awaitUp waits until the agent is up and also holds.
func (wt *Watch) awaitUp(ctx context.Context, also func() bool) error {
	deadline := time.NewTimer(wt.Timeout)
	defer deadline.Stop()
	for {
		changed := wt.Ready.Changed()
		switch {
		case wt.Life.Phase() == life.Dead:
			return wt.DeadError()
		case wt.Life.Phase() == life.Up && also():
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("the agent exited during the rebuild and was not back within %s", wt.Timeout)
		case <-wt.Quit:
			return errors.New("the agent exited during the rebuild, and acp-sidecar is shutting down")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (wt *Watch) DeadError() error {
	why := wt.Life.LastExit()
	return wire.Refuse(proxy.CodeAgentGone, "acp-sidecar: the agent keeps exiting (%s), so it is no longer restarted. Close this session and check the agent.", why)
}

func (wt *Watch) TimeoutError() error {
	what := "the session to be rebuilt"
	if wt.Life.Phase() == life.Restarting {
		what = "the agent to restart"
	}
	return wire.Refuse(proxy.CodeAgentGone, "acp-sidecar: waited %s for %s; the request was not sent. Your session was kept: send it again, and check the agent if this repeats.", wt.Timeout, what)
}

// SendOwn writes a frame of the sidecar's own; a failure means the client
// is gone, and there is nobody left to tell.
func SendOwn(sc Sidecar, log *slog.Logger, dir proxy.Direction, line []byte) {
	if err := sc.Send(dir, line); err != nil {
		log.Debug("send", "dir", dir.String(), "err", err)
	}
}
