package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/switchboard"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// runMulti is the relay with several agents: each runs behind a relay and a
// recorder of its own, as a single agent would, and a switchboard is their
// one client and routes the editor's sessions between them.
func runMulti(ctx context.Context, o runOptions, s stdio) error {
	if isTerminal(s.in) {
		return execAgent(o.argv)
	}
	if !o.record {
		return &exitError{code: 2, err: errors.New("several agents need the record (--record): a switch hands the conversation over from it")}
	}
	env, err := prepare(ctx, &o, s)
	if err != nil {
		return err
	}
	defer env.close()
	log := env.log

	global, err := parseSettings(o.sets)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defs := map[string]agentDef{}
	var refs []switchboard.AgentRef
	for _, d := range o.agents.defs {
		defs[d.Name] = d
		refs = append(refs, switchboard.AgentRef{Name: d.Name, Command: d.Argv})
	}
	stacks := &stackSet{}
	start := func(ctx context.Context, name string) (*switchboard.Backend, error) {
		d := defs[name]
		own, err := parseSettings(d.Sets)
		if err != nil {
			return nil, err
		}
		return stacks.start(ctx, o, env, s, d, append(append([]intercept.Setting(nil), global...), own...))
	}
	sw := switchboard.New(switchboard.Config{
		Agents: refs, Default: o.agents.defaultName, Start: start, Store: env.store,
		Idle: o.agents.idle, CallTimeout: o.callTimeout, MaxFrame: o.maxFrame, Log: log,
	})

	in := pollable(s.in)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			log.Info("signal received; stopping the agents", "signal", sig.String())
			stacks.signal(context.WithoutCancel(ctx), sig)
			// The editor may keep its end open: the switchboard stops
			// reading it, and stops the agents as on its EOF.
			if c, ok := in.(io.Closer); ok {
				c.Close()
			}
		case <-done:
		}
	}()
	err = sw.Run(ctx, in, s.out)
	stacks.wait()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		log.Error("switchboard ended with an error", "err", err)
		return &exitError{code: 1, err: err}
	}
	return nil
}

// runEnv is what every agent of a run shares: the log, the trace and the
// store.
type runEnv struct {
	log   *slog.Logger
	trace *proxy.Trace
	store state.Store
	close func()
}

// prepare checks the options and opens the log, the trace and the store.
func prepare(ctx context.Context, o *runOptions, s stdio) (*runEnv, error) {
	if o.stateDir == "" {
		o.stateDir = defaultStateDir()
	}
	if o.store != "disk" && o.store != "memory" {
		return nil, &exitError{code: 2, err: fmt.Errorf("--store %q: want disk or memory", o.store)}
	}
	if o.budget < 1024 || o.budget > 64<<10 {
		return nil, &exitError{code: 2, err: fmt.Errorf("--handoff-budget %d: want 1024 to 65536 bytes", o.budget)}
	}
	log, closeLog, err := openLog(*o)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	env := &runEnv{log: log}
	closers := []func(){closeLog}
	env.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if o.trace != "" {
		f, err := os.OpenFile(o.trace, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			env.close()
			return nil, &exitError{code: 2, err: fmt.Errorf("open trace: %w", err)}
		}
		fmt.Fprintf(s.err, "acp-sidecar: --trace records the whole conversation in %s\n", o.trace)
		env.trace = proxy.NewTrace(f)
		closers = append(closers, func() { env.trace.Close() })
	}
	store, closeStore := openStore(ctx, *o, log, s)
	env.store = store
	closers = append(closers, closeStore)
	if err := proxy.AdoptOrphans(); err != nil {
		log.Warn("cannot adopt the agent's orphans; a crashed agent's children may outlive it", "err", err)
	}
	return env, nil
}

// stackSet owns the agents a switchboard started: each one's relay,
// recorder and supervisor, until they have ended.
type stackSet struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[*supervisor]bool
}

// start runs one agent behind a relay and a recorder of its own; the
// switchboard is its client, through a pair of pipes.
func (ss *stackSet) start(ctx context.Context, o runOptions, env *runEnv, s stdio, d agentDef, settings []intercept.Setting) (*switchboard.Backend, error) {
	log := env.log.With("agent", d.Name)
	spec := proxy.AgentSpec{Argv: d.Argv, Stderr: s.err, Grace: o.grace, Log: log}
	if len(d.Env) > 0 {
		spec.Env = append(os.Environ(), d.Env...)
	}
	agent, err := proxy.StartAgent(spec)
	if err != nil {
		return nil, err
	}
	log.Info("agent started", "argv0", d.Argv[0], "agentPid", agent.Pid())
	rec := intercept.NewRecorder(intercept.RecorderConfig{
		Store: env.store, Log: log, Agent: d.Argv, Name: d.Name, Settings: settings, Version: version,
		HandoffBudget: o.budget, CallTimeout: o.callTimeout, HoldTimeout: o.holdTimeout,
	})
	sup := &supervisor{log: log, rec: rec, cur: agent, restart: o.restart, sup: &proxy.Supervisor{Spec: spec, Policy: o.policy}}
	sup.stopCtx, sup.stop = context.WithCancel(context.WithoutCancel(ctx))
	clientIn, toRelay := io.Pipe()
	fromRelay, clientOut := io.Pipe()
	// The owner of the agent's shutdown, as in run: it starts when the
	// switchboard closes the relay's input (its client's EOF).
	eof, relayDone, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-eof:
			sup.shutdown(context.WithoutCancel(ctx), nil)
		case <-relayDone:
		}
	}()
	cfg := proxy.Config{
		ClientIn: clientIn, ClientOut: clientOut, AgentIn: agent.Stdin, AgentOut: agent.Stdout,
		MaxFrame: o.maxFrame, Hook: buildChain(ctx, log, rec, true), Trace: env.trace, Log: log,
		OnClientEOF: func() { close(eof) },
	}
	if sup.restart {
		cfg.OnAgentExit = sup.onExit
	}
	relay := proxy.NewRelay(cfg)
	rec.Bind(relay)
	rec.Start(ctx)
	ss.mu.Lock()
	if ss.running == nil {
		ss.running = map[*supervisor]bool{}
	}
	ss.running[sup] = true
	ss.mu.Unlock()
	ended := make(chan struct{})
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		defer close(ended)
		if err := relay.Run(ctx); err != nil {
			log.Error("relay ended with an error", "err", err)
		}
		close(relayDone)
		<-stopped
		sup.wait()
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := rec.Close(closeCtx); err != nil {
			log.Error("recorder did not finish", "err", err)
		}
		cancel()
		code, byUs := sup.finish()
		log.Info("agent ended", "status", code, "stoppedBySidecar", byUs)
		ss.mu.Lock()
		delete(ss.running, sup)
		ss.mu.Unlock()
		clientOut.Close()
	}()
	return &switchboard.Backend{
		Rec: rec, In: toRelay, Out: fromRelay,
		// Stopping is the client's EOF: the relay closes the agent's
		// stdin, and the shutdown above takes it from there.
		Stop: func() {
			toRelay.Close()
			<-ended
		},
	}, nil
}

// signal passes a signal to every running agent's tree.
func (ss *stackSet) signal(ctx context.Context, sig os.Signal) {
	ss.mu.Lock()
	var sups []*supervisor
	for s := range ss.running {
		sups = append(sups, s)
	}
	ss.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Go(func() { s.shutdown(ctx, sig) })
	}
	wg.Wait()
}

// wait returns once every agent started has ended.
func (ss *stackSet) wait() { ss.wg.Wait() }
