package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

type runOptions struct {
	argv     []string
	logFile  string
	logLevel string
	trace    string
	maxFrame int
	grace    time.Duration
	stateDir string
	store    storeSpec
	leaseTTL time.Duration // a fleet's store: state.PostgresOptions.LeaseTTL
	// host names this host in the record's native sessions and a fleet's
	// leases; prepare makes "" the system's host name.
	host        string
	takeover    bool // a fleet's store: intercept.Config.Takeover
	maxProtocol int  // intercept.Config.MaxProtocol
	noPickers   bool // --pickers=off: intercept.Config.NoPickers
	sets        []string
	record      bool
	budget      int
	restart     bool
	policy      proxy.RestartPolicy
	callTimeout time.Duration
	holdTimeout time.Duration
	strict      bool // proxy.Config.Strict
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

	settings, err := parseSettings(o.sets)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	sp := stackSpec{
		argv: o.argv, settings: settings, record: o.record, restart: o.restart && o.record, orphans: true,
		clientIn: pollable(s.in), clientOut: s.out, signals: sigs,
	}
	if defs := o.agents.defs; len(defs) == 1 {
		sp.env = defs[0].Env
	}
	st, err := startStack(ctx, o, env, s, sp)
	if err != nil {
		return &exitError{code: 127, err: err}
	}
	return exitStatus(st.run(ctx))
}

// parseSettings reads --set values (and an agent's own set list).
func parseSettings(raw []string) ([]record.Setting, error) {
	var out []record.Setting
	for _, r := range raw {
		st, err := record.ParseSetting(r)
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
	var st state.Store
	var err error
	switch o.store.kind {
	case "memory":
		m := state.NewMemory()
		return m, func() { m.Close() }
	case "postgres":
		// The host's own store keeps what the fleet's cannot take while
		// the database is out of reach; without it, that waits in memory.
		local, lerr := state.Open(ctx, o.stateDir, state.Options{Logger: log})
		if lerr != nil {
			log.Warn("no store of this host's to keep writes in while the fleet's database is out of reach", "err", lerr)
			local = nil
		}
		fleet, err := o.store.openPostgres(ctx, log, o.leaseTTL, o.host, storeOrNil(local), o.stateDir)
		if err != nil {
			if local != nil {
				local.Close() // closing what was only opened: nothing of it was written
			}
			mem := state.NewMemory()
			fmt.Fprintf(s.err, "acp-sidecar: %s cannot be used (%v); recording in memory only\n", o.store.describe(""), err)
			log.Error("store unusable; recording in memory", "store", o.store.where, "err", err)
			return mem, func() { mem.Close() }
		}
		return fleet, func() {
			if err := fleet.Close(); err != nil {
				log.Warn("close store", "err", err)
			}
			if local != nil {
				if err := local.Close(); err != nil {
					log.Warn("close the host's store", "err", err)
				}
			}
		}
	default:
		st, err = state.Open(ctx, o.stateDir, state.Options{Logger: log})
	}
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

// storeOrNil is s as a state.Store, or a nil interface for a nil s.
func storeOrNil(s *state.Shared) state.Store {
	if s == nil {
		return nil
	}
	return s
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
