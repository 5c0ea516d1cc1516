package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/conformance/bench"
	"github.com/acp-sidecar/acp-sidecar/conformance/demo"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
	"github.com/acp-sidecar/acp-sidecar/conformance/suite"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// runMain builds the CLI and runs it, returning the process's exit status.
func runMain(ctx context.Context, args []string, s stdio) int {
	app := newApp(s)
	err := app.RunContext(ctx, args)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(s.err, "acp-sidecar: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(s.err, "acp-sidecar: %v\n", err)
	return 2
}

func envs(name string) []string { return []string{"ACP_SIDECAR_" + name} }

// relayFlags are the flags of the default (relay) action.
func relayFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-file", EnvVars: envs("LOG_FILE"), Usage: "write the sidecar's log here (default: sidecar.log in the state dir)"},
		&cli.StringFlag{Name: "log-level", EnvVars: envs("LOG_LEVEL"), Value: "info", Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "trace", EnvVars: envs("TRACE"), Usage: "write every frame as JSONL to `FILE` (it records conversation content)"},
		&cli.IntFlag{Name: "max-frame", EnvVars: envs("MAX_FRAME"), Value: proxy.DefaultMaxFrame, Usage: "largest frame in bytes; larger ones get a clear error"},
		&cli.DurationFlag{Name: "grace", EnvVars: envs("GRACE"), Value: proxy.DefaultGrace, Usage: "how long the agent gets at each shutdown step"},
		&cli.StringFlag{Name: "state-dir", EnvVars: envs("STATE_DIR"), Usage: "where sessions and logs are kept (default $XDG_STATE_HOME/acp-sidecar)"},
		&cli.StringFlag{Name: "store", EnvVars: envs("STORE"), Value: "disk", Usage: storeUsage},
		&cli.StringFlag{Name: "host", EnvVars: envs("HOST"), Usage: "this host's name in the record's native sessions and a fleet's leases (default: the system's host name)"},
		&cli.DurationFlag{Name: "lease-ttl", EnvVars: envs("LEASE_TTL"), Value: state.DefaultLeaseTTL, Usage: "with a fleet's store: how long a session stays this sidecar's without a renewal (renewed every third of it)"},
		&cli.IntFlag{Name: "max-protocol", EnvVars: envs("MAX_PROTOCOL"), Usage: "the highest ACP version the editor and the agent may agree on, 1 or 2 (default: 2, the highest the sidecar speaks; 1 behind several agents, whose selector speaks v1 only)"},
		&cli.BoolFlag{Name: "takeover", EnvVars: envs("TAKEOVER"), Usage: "with a fleet's store: a client's load or resume takes the session from another sidecar even while its lease is live (for orchestrators that know that host is gone)"},
		&cli.StringFlag{Name: "pickers", EnvVars: envs("PICKERS"), Value: "on", Usage: "on: show a client the model and mode pickers in the dialect it reads (legacy modes and models, or configOptions) where the agent offers them only in the other; off: pass the agent's own"},
		&cli.BoolFlag{Name: "record", EnvVars: envs("RECORD"), Value: true, Usage: "keep the session record; --record=false relays only (for measuring the recorder's cost)"},
		&cli.IntFlag{Name: "handoff-budget", EnvVars: envs("HANDOFF_BUDGET"), Value: 16 << 10, Usage: "bytes of kept turns handed to a fresh native session (at most 65536)"},
		&cli.DurationFlag{Name: "call-timeout", EnvVars: envs("CALL_TIMEOUT"), Value: intercept.DefaultCallTimeout, Usage: "how long each of the sidecar's own calls to the agent (session/new, set_*) may take before a restore reports it failed"},
		&cli.DurationFlag{Name: "hold-timeout", EnvVars: envs("HOLD_TIMEOUT"), Value: rebuild.DefaultHoldTimeout, Usage: "how long a request waits while the agent restarts or its session is rebuilt, before it gets an error"},
		&cli.BoolFlag{Name: "restart", EnvVars: envs("RESTART"), Value: true, Usage: "start the agent again when it exits while the editor is still there"},
		&cli.IntFlag{Name: "max-restarts", EnvVars: envs("MAX_RESTARTS"), Value: proxy.DefaultRestartPolicy.Max, Usage: "restarts allowed within --restart-window before giving up"},
		&cli.DurationFlag{Name: "restart-window", EnvVars: envs("RESTART_WINDOW"), Value: proxy.DefaultRestartPolicy.Window, Usage: "the window --max-restarts counts in"},
		&cli.StringSliceFlag{Name: "set", EnvVars: envs("SET"), Usage: "apply `ID=VALUE` to every new session (ID: an option id, or model or mode); repeatable"},
		newRawListFlag("agent", "AGENT", "an agent sessions may switch to, as `NAME=COMMAND` (COMMAND split like a shell would, nothing expanded); repeatable; the env var takes one per line"),
		&cli.StringFlag{Name: "agents", EnvVars: envs("AGENTS"), Usage: "read agents from `FILE` (.json or .toml; docs/agents.md)"},
		&cli.StringFlag{Name: "default-agent", EnvVars: envs("DEFAULT_AGENT"), Usage: "the agent new sessions start on, by `NAME` (default: the agents file's default, else the first agent)"},
		// The tests' guard (scripts/test sets it): a stage that answers a
		// request twice, or never, panics instead of being logged.
		&cli.BoolFlag{Name: "strict-answers", EnvVars: envs("STRICT_ANSWERS"), Hidden: true, Usage: "panic when the sidecar would answer a request twice or never (for tests)"},
		&cli.DurationFlag{Name: "agent-idle", EnvVars: envs("AGENT_IDLE"), Value: defaultAgentIdle, Usage: "stop an agent no session uses after this long; 0: never"},
	}
}

func newApp(s stdio) *cli.App {
	return &cli.App{
		Name:      "acp-sidecar",
		Usage:     "keep ACP sessions' config and conversation across resets, crashes and rollbacks",
		UsageText: "acp-sidecar [flags] -- AGENT [ARGS...]\nacp-sidecar COMMAND [flags]",
		Version:   version,
		Reader:    s.in,
		Writer:    s.err, // help and errors never go to stdout: it carries ACP
		ErrWriter: s.err,
		Flags:     relayFlags(),
		Action: func(c *cli.Context) error {
			opts, err := relayOptions(c)
			if errors.Is(err, errNoAgent) {
				cli.ShowAppHelp(c)
			}
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return run(c.Context, opts, s)
		},
		HideHelpCommand: true,
		Commands: []*cli.Command{
			sessionsCommand(s),
			showCommand(s),
			handoffCommand(s),
			deleteCommand(s),
			uiCommand(s),
			serveCommand(s),
			connectCommand(s),
			{
				Name:            "fakeagent",
				Usage:           "run the built-in fake ACP agent on stdio (for tests and the demo; -h lists its flags)",
				SkipFlagParsing: true,
				Action: func(c *cli.Context) error {
					return exitCode(fakeagent.Main(c.Context, c.Args().Slice(), s.in, s.out, s.err))
				},
			},
			{
				Name:            "bench",
				Usage:           "measure the relay against a plain byte-copy relay and print ratios",
				SkipFlagParsing: true,
				Action: func(c *cli.Context) error {
					exe, err := os.Executable()
					if err != nil {
						return &exitError{code: 2, err: fmt.Errorf("find own binary: %w", err)}
					}
					return exitCode(bench.Main(c.Context, exe, c.Args().Slice(), s.out, s.err))
				},
			},
			{
				Name:            "conformance",
				Usage:           "run the conformance checks against an agent, directly and through the sidecar (-h lists them)",
				SkipFlagParsing: true,
				Action: func(c *cli.Context) error {
					exe, err := os.Executable()
					if err != nil {
						return &exitError{code: 2, err: fmt.Errorf("find own binary: %w", err)}
					}
					return exitCode(suite.Main(c.Context, exe, c.Args().Slice(), s.out, s.err))
				},
			},
			{
				Name:  "demo",
				Usage: "drive a scripted editor through the sidecar to the built-in fake agent and tell what happened",
				Flags: []cli.Flag{&cli.StringFlag{Name: "keep-state", Usage: "keep the demo's record in `DIR` (default: a temporary dir)"}},
				Action: func(c *cli.Context) error {
					exe, err := os.Executable()
					if err != nil {
						return &exitError{code: 2, err: fmt.Errorf("find own binary: %w", err)}
					}
					if err := demo.Run(c.Context, exe, c.String("keep-state"), s.out); err != nil {
						return &exitError{code: 1, err: err}
					}
					return nil
				},
			},
			{
				Name:            "mockllm",
				Usage:           "serve a mock Anthropic Messages API on loopback (for offline end-to-end tests)",
				SkipFlagParsing: true,
				Action: func(c *cli.Context) error {
					return exitCode(mockllm.Main(c.Context, c.Args().Slice(), s.out, s.err))
				},
			},
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Fprintf(s.out, "acp-sidecar %s\n", version)
					return nil
				},
			},
		},
		ExitErrHandler: func(*cli.Context, error) {}, // runMain reports errors
	}
}

// maxProtocolOf is the highest ACP version the editor and the agent may
// agree on (--max-protocol): the highest the sidecar speaks by default, but
// v1 in front of several agents, whose selector and switch speak v1's words
// only; asking for v2 there is refused.
func maxProtocolOf(c *cli.Context, agents int) (int, error) {
	if !c.IsSet("max-protocol") {
		if agents > 1 {
			return int(wire.V1), nil
		}
		return int(intercept.SpokenVersion), nil
	}
	v := c.Int("max-protocol")
	if v < 1 || v > int(intercept.SpokenVersion) {
		return 0, &exitError{code: 2, err: fmt.Errorf("--max-protocol %d: the sidecar speaks ACP 1 and 2", v)}
	}
	if v > 1 && agents > 1 {
		return 0, &exitError{code: 2, err: fmt.Errorf("--max-protocol %d: several agents behind one sidecar speak ACP v1 only (docs/v2.md)", v)}
	}
	return v, nil
}

// relayOptions reads the relay action's flags and arguments. The agent
// started first is the default one; with a single agent that is the only
// one, and its own start-up settings join --set.
func relayOptions(c *cli.Context) (runOptions, error) {
	agents, err := agentOptionsFrom(c)
	if err != nil {
		return runOptions{}, err
	}
	def, _ := agents.def(agents.defaultName)
	store, err := parseStore(c.String("store"))
	if err != nil {
		return runOptions{}, err
	}
	var noPickers bool
	switch p := c.String("pickers"); p {
	case "on":
	case "off":
		noPickers = true
	default:
		return runOptions{}, &exitError{code: 2, err: fmt.Errorf("--pickers %q: want on or off", p)}
	}
	maxProtocol, err := maxProtocolOf(c, len(agents.defs))
	if err != nil {
		return runOptions{}, err
	}
	opts := runOptions{
		noPickers:   noPickers,
		argv:        def.Argv,
		logFile:     c.String("log-file"),
		logLevel:    c.String("log-level"),
		trace:       c.String("trace"),
		maxFrame:    c.Int("max-frame"),
		grace:       c.Duration("grace"),
		stateDir:    c.String("state-dir"),
		store:       store,
		leaseTTL:    c.Duration("lease-ttl"),
		host:        c.String("host"),
		takeover:    c.Bool("takeover"),
		maxProtocol: maxProtocol,
		sets:        c.StringSlice("set"),
		record:      c.Bool("record"),
		budget:      c.Int("handoff-budget"),
		restart:     c.Bool("restart"),
		callTimeout: c.Duration("call-timeout"),
		holdTimeout: c.Duration("hold-timeout"),
		strict:      c.Bool("strict-answers"),
		policy:      proxy.DefaultRestartPolicy,
		agents:      agents,
	}
	if len(agents.defs) == 1 {
		// Per-agent settings come after --set, so the more specific wins.
		opts.sets = append(opts.sets, def.Sets...)
	}
	opts.policy.Max, opts.policy.Window = c.Int("max-restarts"), c.Duration("restart-window")
	return opts, nil
}

// exitCode turns a status into the error runMain reports as that status.
func exitCode(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}
