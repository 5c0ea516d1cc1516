package main

import (
	"context"
	"io"
	"os"
	"sync"

	"github.com/acp-sidecar/acp-sidecar/agenthost"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// What a stack hands agenthost/ of intercept/: the agent's life, told of
// each death and restart, and the recorder closed in the teardown.
var (
	_ agenthost.Life     = (*intercept.Agent)(nil)
	_ agenthost.Recorder = (*intercept.Core)(nil)
)

// A stack is one agent behind its relay: the agent (agenthost.Agent, which
// owns its process's life and the teardown order), the recorder, the chain
// and the relay. The relay with one agent runs one stack on the sidecar's
// stdio; the relay with several runs one per agent, each on the
// switchboard's port.
type stack struct {
	core  *intercept.Core
	agent *agenthost.Agent
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
	// The core comes first: the agent's life in it is told of the agent's
	// deaths. It starts nothing until core.Start.
	core := intercept.New(intercept.Config{
		Store: env.store, Log: log, Agent: sp.argv, Name: sp.name, Settings: sp.settings, Version: version, Host: env.host,
		HandoffBudget: o.budget, CallTimeout: o.callTimeout, HoldTimeout: o.holdTimeout, Takeover: o.takeover, NoPickers: o.noPickers, MaxProtocol: o.maxProtocol,
	})
	agent, err := agenthost.Start(agenthost.Config{Spec: spec, Restart: sp.restart, Policy: o.policy, Life: core.Agent()})
	if err != nil {
		return nil, err
	}
	st := &stack{core: core, agent: agent, eof: make(chan struct{}), signals: sp.signals}
	var eofOnce sync.Once
	cfg := proxy.Config{
		ClientIn: sp.clientIn, ClientOut: sp.clientOut, Client: sp.port, Egress: sp.egress,
		MaxFrame: o.maxFrame, LongFrames: s.longFrames, Hook: buildChain(ctx, log, core, sp.record, o.strict), Trace: env.trace, Log: log, Strict: o.strict,
		OnClientEOF: func() { eofOnce.Do(func() { close(st.eof) }) },
	}
	agent.WireRelay(ctx, &cfg)
	st.relay = proxy.NewRelay(cfg)
	core.Bind(st.relay)
	core.Start(ctx)
	return st, nil
}

// hostStack is what agenthost.Agent.Run needs of the stack.
func (st *stack) hostStack() agenthost.Stack {
	return agenthost.Stack{Relay: st.relay, Recorder: st.core, ClientEOF: st.eof, Signals: st.signals}
}

// run relays until the agent is gone for good and tears the stack down in
// agenthost/'s order.
func (st *stack) run(ctx context.Context) agenthost.End { return st.agent.Run(ctx, st.hostStack()) }

// exitStatus is the run's exit status for an agent that ended so: nil when
// the sidecar stopped it or it exited with 0.
func exitStatus(e agenthost.End) error {
	if e.ByUs || e.Code == 0 {
		return nil
	}
	return &exitError{code: e.Code}
}
