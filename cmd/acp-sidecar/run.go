package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

type runOptions struct {
	argv        []string
	logFile     string
	logLevel    string
	trace       string
	maxFrame    int
	grace       time.Duration
	stateDir    string
	store       string
	sets        []string
	record      bool
	budget      int
	restart     bool
	policy      proxy.RestartPolicy
	callTimeout time.Duration
	holdTimeout time.Duration
	agents      agentOptions
}

// run is the relay: start the agent, relay until it is gone, exit with its
// status.
func run(ctx context.Context, o runOptions, s stdio) error {
	if len(o.agents.defs) > 1 {
		return runMulti(ctx, o, s)
	}
	if isTerminal(s.in) {
		// A terminal-login launch (protocol.md §8, 20): the agent wants
		// a person, not ACP. Become the agent.
		return execAgent(o.argv)
	}
	env, err := prepare(ctx, &o, s)
	if err != nil {
		return err
	}
	defer env.close()
	log, trace, store := env.log, env.trace, env.store

	settings, err := parseSettings(o.sets)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	spec := proxy.AgentSpec{Argv: o.argv, Stderr: s.err, Grace: o.grace, Log: log, Orphans: true}
	if defs := o.agents.defs; len(defs) == 1 && len(defs[0].Env) > 0 {
		spec.Env = append(os.Environ(), defs[0].Env...)
	}
	agent, err := proxy.StartAgent(spec)
	if err != nil {
		return &exitError{code: 127, err: err}
	}
	log.Info("agent started", "argv0", o.argv[0], "agentPid", agent.Pid())

	recorder := intercept.NewRecorder(intercept.RecorderConfig{
		Store: store, Log: log, Agent: o.argv, Settings: settings, Version: version, HandoffBudget: o.budget,
		CallTimeout: o.callTimeout, HoldTimeout: o.holdTimeout,
	})
	sup := &supervisor{
		log: log, rec: recorder, cur: agent, restart: o.restart && o.record,
		sup: &proxy.Supervisor{Spec: spec, Policy: o.policy},
	}
	sup.stopCtx, sup.stop = context.WithCancel(context.WithoutCancel(ctx))

	// The owner of the agent's shutdown: it starts on client EOF or on a
	// signal, whichever comes first.
	shutdown := make(chan os.Signal, 1)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	relayDone := make(chan struct{})
	stopped := make(chan struct{})
	relayCtx, cancelRelay := context.WithCancel(ctx)
	defer cancelRelay()
	go func() {
		defer close(stopped)
		var sig os.Signal
		select {
		case sig = <-sigs:
			log.Info("signal received; stopping the agent", "signal", sig.String())
		case sig = <-shutdown:
			log.Info("client closed its input; stopping the agent")
		case <-relayDone:
			return
		}
		sup.shutdown(context.WithoutCancel(ctx), sig)
		if sig != nil {
			// A signal ends the run even though the editor keeps its end
			// of stdin open: the relay stops waiting for it.
			cancelRelay()
		}
	}()

	cfg := proxy.Config{
		ClientIn:    pollable(s.in),
		ClientOut:   s.out,
		AgentIn:     agent.Stdin,
		AgentOut:    agent.Stdout,
		MaxFrame:    o.maxFrame,
		Hook:        buildChain(ctx, log, recorder, o.record),
		Trace:       trace,
		Log:         log,
		OnClientEOF: func() { shutdown <- nil },
	}
	if sup.restart {
		cfg.OnAgentExit = sup.onExit
	}
	relay := proxy.NewRelay(cfg)
	recorder.Bind(relay)
	recorder.Start(ctx)
	relayErr := relay.Run(relayCtx)
	close(relayDone)
	<-stopped
	sup.wait()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	if err := recorder.Close(closeCtx); err != nil {
		log.Error("recorder did not finish", "err", err)
	}
	cancel()
	code, byUs := sup.finish()
	if relayErr != nil {
		log.Error("relay ended with an error", "err", relayErr)
	}
	if byUs {
		log.Info("agent stopped", "status", code)
		return nil
	}
	log.Info("agent exited", "status", code)
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// parseSettings reads --set values (and an agent's own set list).
func parseSettings(raw []string) ([]intercept.Setting, error) {
	var out []intercept.Setting
	for _, r := range raw {
		st, err := intercept.ParseSetting(r)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// openStore opens the record. Nothing stops the relay here: a store that is
// damaged gives way to one in memory, with the reason on stderr and in the
// log, and the damaged files are left where they are for the user.
func openStore(ctx context.Context, o runOptions, log *slog.Logger, s stdio) (state.Store, func()) {
	if o.store == "memory" {
		m := state.NewMemory()
		return m, func() { m.Close() }
	}
	st, err := state.Open(ctx, o.stateDir, state.Options{Logger: log})
	if err != nil {
		mem, notice := state.Fallback(o.stateDir, err)
		fmt.Fprintf(s.err, "acp-sidecar: %s\n", notice)
		log.Error("store unusable; recording in memory", "err", err, "notice", notice)
		return mem, func() { mem.Close() }
	}
	return st, func() {
		if err := st.Close(); err != nil {
			log.Warn("close store", "err", err)
		}
	}
}

// openLog opens the sidecar's log file. The sidecar's stderr stays quiet:
// editors show stderr to the user.
func openLog(o runOptions) (*slog.Logger, func(), error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, nil, fmt.Errorf("--log-level %q: %w", o.logLevel, err)
	}
	path := o.logFile
	if path == "" {
		path = filepath.Join(o.stateDir, "sidecar.log")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("log dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	h := slog.NewTextHandler(f, &slog.HandlerOptions{Level: level})
	log := slog.New(h).With("pid", os.Getpid())
	return log, func() { f.Close() }, nil
}

// pollable returns stdin in a form whose pending read ends when it is closed,
// so the relay's client reader can be stopped and waited for. A plain
// os.Stdin blocks in read(2) until the editor writes or exits.
func pollable(f *os.File) io.Reader {
	if f != os.Stdin {
		return f
	}
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		return f
	}
	return os.NewFile(uintptr(fd), "stdin")
}

// execAgent replaces this process with the agent.
func execAgent(argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return &exitError{code: 127, err: fmt.Errorf("agent %q: %w", argv[0], err)}
	}
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return &exitError{code: 126, err: fmt.Errorf("exec %s: %w", strings.Join(argv, " "), err)}
	}
	return nil
}
