package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/acp-sidecar/acp-sidecar/agenthost"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
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
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	return runSwitchboard(ctx, o, env, s, pollable(s.in), s.out, sigs)
}

// runSwitchboard runs several agents behind one client, which reads in and
// writes out (the sidecar's stdio, or a connection of serve's), until the
// client goes, or a signal on sigs (nil: none) stops the agents.
func runSwitchboard(ctx context.Context, o runOptions, env *runEnv, s stdio, in io.Reader, out io.Writer, sigs <-chan os.Signal) error {
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
	port := proxy.NewClientPort(proxy.PortConfig{In: in, Out: out, MaxFrame: o.maxFrame, LongFrames: s.longFrames, Trace: env.trace, Log: log})
	agents := &agenthost.Group{}
	start := func(ctx context.Context, name string, out proxy.Egress) (*switchboard.Backend, error) {
		d := defs[name]
		own, err := parseSettings(d.Sets)
		if err != nil {
			return nil, err
		}
		sp := stackSpec{
			name: d.Name, argv: d.Argv, env: d.Env, settings: append(append([]record.Setting(nil), global...), own...),
			record: true, restart: o.restart, port: port, egress: out,
		}
		st, err := startStack(ctx, o, env, s, sp)
		if err != nil {
			return nil, err
		}
		ended := agents.Go(ctx, st.agent, st.hostStack())
		return &switchboard.Backend{
			Rec: st.core.Sessions(), Relay: st.relay, Done: ended,
			// Stopping is the client's EOF: the relay closes the agent's
			// stdin, and the agent's shutdown takes it from there.
			Stop: func() {
				st.relay.CloseClient()
				<-ended
			},
		}, nil
	}
	sw := switchboard.New(switchboard.Config{
		Agents: refs, Default: o.agents.defaultName, Port: port, Start: start, Store: env.store,
		Idle: o.agents.idle, CallTimeout: o.callTimeout, Log: log, Strict: o.strict,
	})

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			log.Info("signal received; stopping the agents", "signal", sig.String())
			agents.Shutdown(context.WithoutCancel(ctx), sig)
			// The editor may keep its end open: the switchboard stops
			// reading it, and stops the agents as on its EOF.
			if c, ok := in.(io.Closer); ok {
				c.Close()
			}
		case <-done:
		}
	}()
	err = sw.Run(ctx)
	agents.Wait()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		log.Error("switchboard ended with an error", "err", err)
		return &exitError{code: 1, err: err}
	}
	return nil
}

// runEnv is what every agent of a run shares: the log, the trace and the
// store.
type runEnv struct {
	// host names this host in the record's native sessions, "" when the
	// system does not say.
	host  string
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
	if o.budget < 1024 || o.budget > 64<<10 {
		return nil, &exitError{code: 2, err: fmt.Errorf("--handoff-budget %d: want 1024 to 65536 bytes", o.budget)}
	}
	log, closeLog, err := openLog(*o)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	env := &runEnv{log: log}
	if o.host == "" {
		if o.host, err = os.Hostname(); err != nil {
			// The record then names no host: only a failover in a fleet
			// is told apart by it, and shows as a reopen.
			log.Warn("this host has no name; the record notes none with the native sessions (--host names it)", "err", err)
		}
	}
	env.host = o.host
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
