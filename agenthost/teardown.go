package agenthost

import (
	"context"
	"os"
	"time"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Relay is what Run relays through: a proxy.Relay that WireRelay wired.
type Relay interface {
	// Run relays until the agent is gone for good and the client's side
	// has ended, or ctx ends.
	Run(ctx context.Context) error
}

var _ Relay = (*proxy.Relay)(nil)

// Recorder keeps the record of the agent's sessions (intercept.Core is
// one).
type Recorder interface {
	// Close is called once, after the relay has ended and the agent's
	// shutdown and the initializes of restarted agents are done, so
	// nothing it is to record is still on its way. It writes what it
	// holds and returns when done or when ctx ends (recorderCloseBound);
	// its error is logged.
	Close(ctx context.Context) error
}

// A Stack is what runs with one agent: its relay, its recorder, and what
// starts its shutdown.
type Stack struct {
	Relay Relay
	// Recorder, when set, is closed in the teardown, before the last
	// agent's status is read.
	Recorder Recorder
	// ClientEOF closes when the relay's client side has ended (the
	// relay's OnClientEOF): the client closed its input, or the owner of
	// several agents stopped this one. The agent's shutdown then starts
	// quietly, with its stdin closed.
	ClientEOF <-chan struct{}
	// Signals, when set, start the agent's shutdown with the signal
	// received sent to its tree, and end the relay even while the
	// client's input stays open: an editor may signal the sidecar and
	// keep its end of stdin.
	Signals <-chan os.Signal
}

// recorderCloseBound bounds the recorder's last writes at the end of a run.
const recorderCloseBound = 10 * time.Second

// Run relays until the agent is gone for good, then tears the run down in
// order: the owner of the agent's shutdown, the goroutines that initialize
// restarted agents, the recorder's last writes (bounded), the last agent's
// status. It returns once all of them are done. The recorder is closed
// only once nothing feeds it any more: not the relay's frames, not the
// Life's calls on a death (Gone) nor the initializes of restarted agents
// (Back).
func (a *Agent) Run(ctx context.Context, st Stack) End {
	relayCtx, cancelRelay := context.WithCancel(ctx)
	defer cancelRelay()
	relayDone, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		a.stopOn(ctx, st, relayDone, cancelRelay)
	}()
	relayErr := st.Relay.Run(relayCtx)
	close(relayDone)
	<-stopped
	a.wait()
	if st.Recorder != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recorderCloseBound)
		if err := st.Recorder.Close(closeCtx); err != nil {
			a.log.Error("recorder did not finish", "err", err)
		}
		cancel()
	}
	if relayErr != nil {
		a.log.Error("relay ended with an error", "err", relayErr)
	}
	end := a.finish()
	if end.ByUs {
		a.log.Info("agent stopped", "status", end.Code)
	} else {
		a.log.Info("agent exited", "status", end.Code)
	}
	return end
}

// stopOn owns the agent's shutdown during Run: it starts it on the
// client's EOF or on a signal, whichever comes first, and returns once the
// agent is down, or at once if the relay ends first (the agent then ended
// by itself). The shutdown outlives ctx's end: an agent left half stopped
// would outlive the sidecar.
func (a *Agent) stopOn(ctx context.Context, st Stack, relayDone <-chan struct{}, cancelRelay context.CancelFunc) {
	var sig os.Signal
	select {
	case sig = <-st.Signals:
		a.log.Info("signal received; stopping the agent", "signal", sig.String())
	case <-st.ClientEOF:
		a.log.Info("client closed its input; stopping the agent")
	case <-relayDone:
		return
	}
	a.Shutdown(context.WithoutCancel(ctx), sig)
	if sig != nil {
		// A signal ends the run even though the editor keeps its end of
		// stdin open: the relay stops waiting for it.
		cancelRelay()
	}
}
