package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// A stack is one agent behind its relay: the agent's process and its
// supervisor, the recorder, the chain and the relay, and the teardown that
// ends them in order. The relay with one agent runs one stack on the
// sidecar's stdio; the relay with several runs one per agent, each on the
// switchboard's port.
type stack struct {
	log   *slog.Logger
	core  *intercept.Core
	sup   *supervisor
	relay *proxy.Relay
	// eof is closed when the relay's client side ends: the client closed
	// its input, or the switchboard stopped the agent.
	eof     chan struct{}
	signals <-chan os.Signal
}

// stackSpec is what differs between the stacks of a run.
type stackSpec struct {
	name     string // the agent's configured name; "" with one agent
	argv     []string
	env      []string // KEY=VALUE added to the sidecar's environment
	settings []record.Setting
	record   bool
	restart  bool
	// orphans: this process runs nothing but this agent, so a shutdown
	// also stops whatever else it left (proxy.AgentSpec.Orphans).
	orphans bool
	// The client's side: the sidecar's stdio, or with port set the
	// switchboard's port, through egress.
	clientIn  io.Reader
	clientOut io.Writer
	port      *proxy.ClientPort
	egress    proxy.Egress
	// signals, when set, start the agent's shutdown as the client's EOF
	// does, and end the relay even while the client's input stays open.
	signals <-chan os.Signal
}

// startStack starts the agent and builds its stack; run relays.
func startStack(ctx context.Context, o runOptions, env *runEnv, s stdio, sp stackSpec) (*stack, error) {
	log := env.log
	if sp.name != "" {
		log = log.With("agent", sp.name)
	}
	spec := proxy.AgentSpec{Argv: sp.argv, Stderr: s.err, Grace: o.grace, Log: log, Orphans: sp.orphans}
	if len(sp.env) > 0 {
		spec.Env = append(os.Environ(), sp.env...)
	}
	agent, err := proxy.StartAgent(spec)
	if err != nil {
		return nil, err
	}
	log.Info("agent started", "argv0", sp.argv[0], "agentPid", agent.Pid())
	core := intercept.New(intercept.Config{
		Store: env.store, Log: log, Agent: sp.argv, Name: sp.name, Settings: sp.settings, Version: version, Host: env.host,
		HandoffBudget: o.budget, CallTimeout: o.callTimeout, HoldTimeout: o.holdTimeout, Takeover: o.takeover, NoPickers: o.noPickers, MaxProtocol: o.maxProtocol,
	})
	sup := &supervisor{log: log, agent: core.Agent(), cur: agent, restart: sp.restart, sup: &proxy.Supervisor{Spec: spec, Policy: o.policy}}
	sup.stopCtx, sup.stop = context.WithCancel(context.WithoutCancel(ctx))
	st := &stack{log: log, core: core, sup: sup, eof: make(chan struct{}), signals: sp.signals}
	var eofOnce sync.Once
	cfg := proxy.Config{
		ClientIn: sp.clientIn, ClientOut: sp.clientOut, Client: sp.port, Egress: sp.egress,
		AgentIn: agent.Stdin, AgentOut: agent.Stdout,
		MaxFrame: o.maxFrame, LongFrames: s.longFrames, Hook: buildChain(ctx, log, core, sp.record, o.strict), Trace: env.trace, Log: log, Strict: o.strict,
		OnClientEOF: func() { eofOnce.Do(func() { close(st.eof) }) },
	}
	if sup.restart {
		cfg.OnAgentEnd = sup.onEnd
		cfg.OnAgentExit = sup.onExit
		cfg.OnAgentStarted = sup.onStarted
	}
	st.relay = proxy.NewRelay(cfg)
	core.Bind(st.relay)
	core.Start(ctx)
	return st, nil
}

// stackEnd is how a stack's agent ended.
type stackEnd struct {
	code int  // the last agent's exit status
	byUs bool // the sidecar stopped it
}

// err is the run's exit status for an agent that ended so: nil when the
// sidecar stopped it or it exited with 0.
func (e stackEnd) err() error {
	if e.byUs || e.code == 0 {
		return nil
	}
	return &exitError{code: e.code}
}

// recorderCloseBound bounds the recorder's last writes at the end of a run.
const recorderCloseBound = 10 * time.Second

// run relays until the agent is gone for good, then tears the stack down
// in order: the agent's shutdown owner, the supervisor's goroutines, the
// recorder's last writes (bounded), the last agent's status. It returns
// once all of them are done.
func (st *stack) run(ctx context.Context) stackEnd {
	relayCtx, cancelRelay := context.WithCancel(ctx)
	defer cancelRelay()
	// The owner of the agent's shutdown: it starts on the client's EOF or
	// on a signal, whichever comes first.
	relayDone, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var sig os.Signal
		select {
		case sig = <-st.signals:
			st.log.Info("signal received; stopping the agent", "signal", sig.String())
		case <-st.eof:
			st.log.Info("client closed its input; stopping the agent")
		case <-relayDone:
			return
		}
		st.sup.shutdown(context.WithoutCancel(ctx), sig)
		if sig != nil {
			// A signal ends the run even though the editor keeps its end
			// of stdin open: the relay stops waiting for it.
			cancelRelay()
		}
	}()
	relayErr := st.relay.Run(relayCtx)
	close(relayDone)
	<-stopped
	st.sup.wait()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recorderCloseBound)
	if err := st.core.Close(closeCtx); err != nil {
		st.log.Error("recorder did not finish", "err", err)
	}
	cancel()
	if relayErr != nil {
		st.log.Error("relay ended with an error", "err", relayErr)
	}
	code, byUs := st.sup.finish()
	if byUs {
		st.log.Info("agent stopped", "status", code)
	} else {
		st.log.Info("agent exited", "status", code)
	}
	return stackEnd{code: code, byUs: byUs}
}
