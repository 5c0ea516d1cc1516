package fakeagent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// config is everything the flags decide.
type config struct {
	Features
	// advisoryFlags are -notices and -compaction (notices.go).
	advisoryFlags
	Profile         string
	AcceptUnknown   bool
	LoadFails       bool
	ForkFails       bool
	LoadKeepsConfig bool
	CrashMidTurn    bool
	DieAfter        int
	DieCode         int
	DieOn           diePoints
	DieOnce         string
	DieMidLoad      bool
	AnswerTwice     methodSet
	ListLag         int
	LoadLag         bool
	Chunks          int
	ChunkSize       int
	IDPrefix        string
	DefaultModel    string
	DefaultMode     string
	CallLog         string
	StdinLog        string
	StdoutLog       string
	State           string
	MaxSDKLine      int
	NoImage         bool
	Verbose         bool
}

func defaultConfig(f Features) config {
	return config{
		Features:     f,
		Profile:      "default",
		DieCode:      1,
		ChunkSize:    16,
		IDPrefix:     "fake-sess-",
		DefaultModel: DefaultModel,
		DefaultMode:  DefaultMode,
		MaxSDKLine:   DefaultMaxSDKLine,
	}
}

// FreshLoadWindow is how long -fresh-load-fails refuses to load a new
// session.
const FreshLoadWindow = time.Minute

func (c config) agentName() string {
	if c.Name == "" {
		return "fake-agent"
	}
	return c.Name
}

func (c config) agentVersion() string {
	if c.Version == "" {
		return "1"
	}
	return c.Version
}

// newFlagSet binds flags to c with c's current values as defaults, so
// parsing twice (once for -profile, once with the profile's values as
// defaults) makes explicit flags win over the profile.
func newFlagSet(c *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fakeagent", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Profile, "profile", c.Profile, "preset: "+strings.Join(ProfileNames(), ", "))
	fs.BoolVar(&c.ConfigOptions, "config-options", c.ConfigOptions, "expose configOptions and answer session/set_config_option")
	fs.BoolVar(&c.LegacyModes, "modes", c.LegacyModes, "expose legacy `modes` in session results")
	fs.BoolVar(&c.LegacyModels, "models", c.LegacyModels, "expose legacy `models` and answer session/set_model")
	fs.BoolVar(&c.ModelDependent, "model-dependent", c.ModelDependent, "effort exists only for some models, with per-model values")
	fs.BoolVar(&c.Load, "load", c.Load, "advertise and answer session/load")
	fs.BoolVar(&c.Resume, "resume", c.Resume, "advertise and answer session/resume")
	fs.BoolVar(&c.List, "list", c.List, "advertise and answer session/list")
	fs.BoolVar(&c.Fork, "fork", c.Fork, "advertise and answer session/fork")
	fs.BoolVar(&c.Close, "close", c.Close, "advertise and answer session/close")
	fs.BoolVar(&c.Delete, "delete", c.Delete, "advertise and answer session/delete: the session is forgotten (and removed from -state)")
	fs.BoolVar(&c.ResumeNotes, "resume-notes", c.ResumeNotes, "send an agent_message_chunk about the model before the session/resume result, like codex-acp 2.6.0")
	fs.BoolVar(&c.ReopenDropsLegacy, "reopen-drops-legacy", c.ReopenDropsLegacy, "leave modes and models out of session/load and session/resume results (session/new keeps them), like codex-acp 2.6.0's resume")
	fs.BoolVar(&c.Commands, "commands", c.Commands, "send available_commands_update after session/new and session/load")
	fs.BoolVar(&c.EarlyUpdates, "early-updates", c.EarlyUpdates, "send session/update for a new session before the session/new response")
	fs.BoolVar(&c.BrokenSetConfig, "broken-set-config", c.BrokenSetConfig, "answer set_config_option with success but change nothing")
	fs.BoolVar(&c.MessageIDs, "message-ids", c.MessageIDs, "give every agent_message_chunk a messageId (UUID-shaped, one per turn, replayed by load)")
	fs.BoolVar(&c.InfoUpdates, "info-updates", c.InfoUpdates, "end every turn with session_info_update (title, updatedAt) and usage_update (with cost); session/list gets updatedAt")
	fs.BoolVar(&c.AuthNotice, "auth-notice", c.AuthNotice, "send an _auth/status_update notification (no session id) right after the initialize response")
	fs.BoolVar(&c.Subagents, "subagents", c.Subagents, "the prompt \"subagent\" opens a child session (subagent_update, its updates, a permission request) if the client advertised clientCapabilities.subagents")
	fs.BoolVar(&c.StrictInit, "strict-init", c.StrictInit, "answer any request before initialize with -32600 \"Invalid request\" (data \"first ACP request must be initialize\") and ignore notifications and responses before it, like codex-acp 2.6.0 and claude-agent-acp 0.101.0")
	fs.BoolVar(&c.IgnoreEOF, "ignore-eof", c.IgnoreEOF, "keep running after stdin EOF until killed")
	fs.BoolVar(&c.QueuePrompts, "queue-prompts", c.QueuePrompts, "a session/prompt that comes while a turn of its session runs waits, and runs once that turn has ended; session/cancel ends the waiting ones too (answered cancelled, -32800 in v2), like claude-agent-acp 0.101.0, which advertises _meta.claudeCode.promptQueueing")
	fs.BoolVar(&c.CommandsInResult, "commands-in-result", c.CommandsInResult, "with -v2 and -commands, in v2: list the commands in every session result (availableCommands) and send no available_commands_update, like codex-acp 2.6.0")
	fs.BoolVar(&c.ResumeLies, "resume-lies", c.ResumeLies, "with -resume: accept a session/resume of a session the agent does not know, then fail every prompt on it with -32603 {details: \"thread not found: ID\"}, like codex-acp 2.6.0 with its thread gone")
	fs.BoolVar(&c.LateAccept, "late-accept", c.LateAccept, "with -v2, in v2: answer a prompt ({messageId}) only after its turn's idle state_update, as an agent that runs the whole turn before it answers")
	fs.BoolVar(&c.V2, "v2", c.V2, "speak ACP v2 to a client whose initialize asks for protocolVersion >= 2 (the answer says 2): prompts answered {messageId} with state_update running/idle, session/resume with replayFrom, configId options, no session/load, set_mode or set_model; a client that asks for 1 gets v1, unchanged")
	fs.BoolVar(&c.AcceptUnknown, "accept-unknown", c.AcceptUnknown, "accept unknown model/mode/option values silently, like real agents")
	fs.BoolVar(&c.LoadFails, "load-fails", c.LoadFails, "answer every session/load with an error")
	fs.BoolVar(&c.ForkFails, "fork-fails", c.ForkFails, "answer every session/fork with an error")
	fs.BoolVar(&c.ForkAtMessage, "fork-at-message", c.ForkAtMessage, "with -fork: session/fork honours _meta.jetbrains.air.fork {version 1, messageId}, keeping the parent's turns up to the one whose answer carried that messageId, like claude-agent-acp 0.101.0 and codex-acp 2.6.0")
	fs.BoolVar(&c.EffortModels, "effort-models", c.EffortModels, "name each legacy model with each of its efforts (\"deep-3[max]\"), and let set_model take such an id, like codex-acp 2.6.0")
	fs.BoolVar(&c.FreshLoadFails, "fresh-load-fails", c.FreshLoadFails, "answer a session/load of a session this process made less than a minute ago with -32603 \"Internal error\", like gemini-cli 0.61.0")
	fs.StringVar(&c.Name, "agent-name", c.Name, "agentInfo.name in the initialize result (default fake-agent)")
	fs.StringVar(&c.Version, "agent-version", c.Version, "agentInfo.version in the initialize result (default 1)")
	fs.BoolVar(&c.LoadKeepsConfig, "load-keeps-config", c.LoadKeepsConfig, "keep a session's config on load/resume (default: back to defaults, like claude, codex, gemini)")
	fs.BoolVar(&c.CrashMidTurn, "crash-mid-turn", c.CrashMidTurn, "exit with status 3 after the first reply chunk of every prompt")
	fs.IntVar(&c.DieAfter, "die-after", c.DieAfter, "exit after the Nth session/prompt response is written (0: never)")
	fs.IntVar(&c.DieCode, "die-code", c.DieCode, "exit status for -die-after, -die-on and -die-mid-load")
	fs.Var(&c.DieOn, "die-on", "exit with -die-code on receiving the Nth message of METHOD (`METHOD[:N]`, N default 1), before handling it; repeatable, or comma separated")
	fs.StringVar(&c.DieOnce, "die-once", c.DieOnce, "-die-on and -die-mid-load fire only if `FILE` does not exist, and create it just before dying, so a restarted agent with the same flags lives")
	fs.BoolVar(&c.DieMidLoad, "die-mid-load", c.DieMidLoad, "exit right after writing the first replayed session/update of a session/load")
	fs.Var(&c.AnswerTwice, "answer-twice", "answer every request of `METHOD` twice: the answer, then at once a second one with the same id (SecondAnswerLine); repeatable, or comma separated")
	fs.BoolVar(&c.LoadLag, "load-lag", c.LoadLag, "with -list-lag, session/load replays nothing of a session -list-lag still leaves out, like claude-agent-acp 0.23.1, which replays the transcript that has yet to land")
	fs.IntVar(&c.ListLag, "list-lag", c.ListLag, "session/list leaves a session out until its first turn has ended and then `N` more session/list calls, like claude-agent-acp 0.23.1, whose claude CLI writes the transcript it lists after the turn's response (0: list every session at once)")
	fs.IntVar(&c.Chunks, "chunks", c.Chunks, "extra agent_message_chunk updates per prompt after the reply line")
	fs.IntVar(&c.ChunkSize, "chunk-size", c.ChunkSize, "bytes per extra chunk")
	fs.StringVar(&c.IDPrefix, "id-prefix", c.IDPrefix, "session id prefix; ids are PREFIX1, PREFIX2, …")
	fs.StringVar(&c.DefaultModel, "default-model", c.DefaultModel, "model of a fresh session")
	fs.StringVar(&c.DefaultMode, "default-mode", c.DefaultMode, "mode of a fresh session")
	fs.StringVar(&c.CallLog, "call-log", c.CallLog, "append one JSON line per received method to `FILE`")
	fs.StringVar(&c.StdinLog, "stdin-log", c.StdinLog, "append every byte read from stdin to `FILE`")
	fs.StringVar(&c.StdoutLog, "stdout-log", c.StdoutLog, "append every byte written to stdout to `FILE`")
	fs.StringVar(&c.State, "state", c.State, "keep sessions in `FILE` (JSON, rewritten after each change) and load it at start, so a restarted agent can load and resume them")
	fs.IntVar(&c.MaxSDKLine, "max-sdk-line", c.MaxSDKLine, "longest stdin line handed to the SDK; longer requests are answered with their size and sha256")
	fs.BoolVar(&c.NoImage, "no-image", c.NoImage, "do not advertise promptCapabilities.image (an agent that takes text only)")
	fs.BoolVar(&c.Verbose, "v", c.Verbose, "log SDK diagnostics at info level to stderr")
	c.advisoryFlags.bind(fs)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: fakeagent [flags]\n\nA fake ACP agent on stdio. Profiles:\n%s\nFlags:\n", profileHelp())
		fs.PrintDefaults()
	}
	return fs
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	first := defaultConfig(Features{})
	if base, ok := lookupProfile("default"); ok {
		first.Features = base
	}
	_ = newFlagSet(&first, io.Discard).Parse(args) // errors are reported by the second pass
	f, ok := lookupProfile(first.Profile)
	if !ok {
		return config{}, fmt.Errorf("unknown profile %q (have %s)", first.Profile, strings.Join(ProfileNames(), ", "))
	}
	cfg := defaultConfig(f)
	cfg.Profile = first.Profile
	fs := newFlagSet(&cfg, stderr)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var models []string
	for _, m := range modelCatalog() {
		models = append(models, m.id)
	}
	if !slices.Contains(models, cfg.DefaultModel) {
		return config{}, fmt.Errorf("-default-model %q: not one of %s", cfg.DefaultModel, strings.Join(models, ", "))
	}
	if !slices.Contains(modeValues(), cfg.DefaultMode) {
		return config{}, fmt.Errorf("-default-mode %q: not one of %s", cfg.DefaultMode, strings.Join(modeValues(), ", "))
	}
	if cfg.MaxSDKLine <= 0 || cfg.MaxSDKLine > 10_000_000 {
		return config{}, fmt.Errorf("-max-sdk-line %d: must be in 1..10000000 (the SDK's own limit)", cfg.MaxSDKLine)
	}
	return cfg, nil
}

func openLog(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return f, nil
}

// Main runs the fake agent on stdin/stdout until stdin ends (exit status 0),
// ctx ends (0), a quirk exits (-crash-mid-turn: 3; -die-after, -die-on and
// -die-mid-load: -die-code), or the flags are wrong (2). It is what
// `acp-sidecar fakeagent` runs, so it never calls os.Exit itself; the caller
// exits with the returned status, at once, which is what keeps a crash
// abrupt. Nothing is written to stdout
// after Main returns. Main does not wait for its stdin reader, which ends at
// the next stdin EOF or error.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fakeagent: %v\n", err)
		return 2
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	logs := make([]io.Writer, 3)
	for i, path := range []string{cfg.CallLog, cfg.StdinLog, cfg.StdoutLog} {
		f, err := openLog(path)
		if err != nil {
			fmt.Fprintf(stderr, "fakeagent: %v\n", err)
			return 2
		}
		if f != nil {
			files = append(files, f)
			logs[i] = f
		}
	}
	if logs[1] != nil {
		stdin = io.TeeReader(stdin, logs[1])
	}
	w := &lineWriter{out: stdout, tee: logs[2], stderr: stderr}
	a := newAgent(cfg, w, callLog{w: logs[0]}, stderr)
	if err := a.sessions.load(); err != nil {
		fmt.Fprintf(stderr, "fakeagent: %v\n", err)
		return 2
	}

	level := slog.LevelWarn
	if cfg.Verbose {
		level = slog.LevelInfo
	}
	sdkIn, sdkFeed := io.Pipe()
	a.connect(acp.NewAgentSideConnection(a, w, sdkIn))
	a.conn.SetLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	defer func() {
		// Stop writing first, so nothing reaches stdout after Main decided
		// to return; then release a crashed prompt and end the SDK's
		// goroutines even while stdin stays open.
		w.kill()
		close(a.crash.stopped)
		sdkFeed.CloseWithError(errStopped)
	}()
	r := a.stdinReader(sdkFeed) // before it starts: queued prompts go the same way
	go r.run(stdin)

	select {
	case code := <-a.crash.exit:
		return code
	case <-a.conn.Done():
		return 0
	case <-ctx.Done():
		if cfg.Verbose {
			fmt.Fprintf(stderr, "fakeagent: stopping: %v\n", context.Cause(ctx))
		}
		return 0
	}
}
