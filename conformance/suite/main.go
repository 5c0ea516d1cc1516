package suite

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
)

// Verdicts. Warn is an advisory check's failure: reported, never failing
// the run. Absorbed is a spec-level check the agent fails (or cannot be
// judged on) directly and passes through the sidecar: a pass, which says
// that the agent alone does not pass it (bothWays).
const (
	Pass     = "pass"
	Fail     = "fail"
	Skip     = "skip"
	Warn     = "warn"
	Absorbed = "absorbed"
)

// verdicts are every verdict a check can have, for the table's widths.
var verdicts = []string{Pass, Fail, Skip, Warn, Absorbed}

// config is what one run of the suite needs.
type config struct {
	exe          string   // the acp-sidecar binary
	agent        []string // the agent command
	env          []string // the user's environment minus the isolated variables (isolate.go)
	keepEnv      []string // isolated variables kept from the user's environment
	homeTemplate string   // copied into every run's fresh home
	only         []string // check ids; nil: all
	timeout      time.Duration
	jsonPath     string
	transcripts  string
	parallel     int       // checks run side by side; below 1 means 1
	warm         bool      // warm a template world with the probe, and copy it into each run's (isolate.go)
	llmLog       string    // the mock LLM's request log (acp-sidecar mockllm -log), which rewind-native reads; "": none
	protocol     int       // the ACP version every run's client speaks (proto.go): 1 (also for 0) or 2
	out          io.Writer // nil: runSuite prints no table; else each row as it is known (table.go)
	progress     io.Writer // nil: no progress lines
	// schema validates every frame a client receives (schema.go); nil:
	// no --schema, and the schema check skips.
	schema *schemaLog
	// template is the warmed world every run's world copies, set by
	// runSuite once the probe has run in it (nil: none); only read after.
	template *world
	// sidecarArgs go first on every sidecar's command line. No flag sets
	// them: the tests use them to start a sidecar that breaks a promise
	// (--restart=false, --store memory).
	sidecarArgs []string
}

const usage = `usage: acp-sidecar conformance [flags] -- AGENT [ARGS...]

Runs each check against a fresh AGENT (and a fresh sidecar with its own state
dir), each run in its own home, XDG dirs, temp dir and cwd (copies of one
warmed once), --parallel checks at a time, and prints a table row as each
check is known: check, tier, verdict (pass, fail, skip with the reason, warn
for an advisory check, absorbed for a check the agent fails alone and passes
through the sidecar), time and detail. Every client speaks ACP --protocol
(1, or 2 with the sidecar started with --max-protocol 2). The exit status is
1 if a mandatory or capability check fails, 2 on a usage error.

Flags:
`

// listFlag is a repeatable flag whose values may also be comma separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// Main runs `acp-sidecar conformance`. exe is the acp-sidecar binary that
// is started as the sidecar (and for `show`). It returns the exit status.
func Main(ctx context.Context, exe string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonPath := fs.String("json", "", "write the report as JSON to `FILE`, and the transcripts to FILE's name without .json plus .transcripts/")
	var only, keep listFlag
	fs.Var(&only, "only", "run only the checks named (`CHECK,...`; repeatable)")
	fs.Var(&keep, "keep-env", "keep the user's `VAR` instead of a fresh one per run (one of "+strings.Join(isolatedVars, ", ")+"; repeatable)")
	homeTemplate := fs.String("home-template", "", "copy `DIR` into every run's fresh home (an agent's config file: API base URL, provider)")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound each check to `D`")
	transcripts := fs.String("transcripts", "", "write each check's transcript to `DIR` (default: next to --json, else a temporary dir)")
	parallel := fs.Int("parallel", 2, "run `N` checks side by side, each in worlds of its own")
	llmLog := fs.String("llm-log", "", "the mock LLM's request log (`FILE` of acp-sidecar mockllm -log): rewind-native reads what the agent's LLM was sent from it")
	warm := fs.Bool("warm", true, "start the agent once in a template world (the probe) and give each run a copy of it, so caches the agent fills are filled once")
	protocol := fs.Int("protocol", protoV1, "the ACP version `N` every client speaks, directly and through the sidecar (1 or 2; 2 starts each sidecar with --max-protocol 2)")
	schemaDir := fs.String("schema", "", "validate every frame a client receives against `DIR`/v1/schema.unstable.json or DIR/v2/… per --protocol (DIR: the schema directory of the @agentclientprotocol/sdk npm package)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nChecks:\n")
		for _, c := range checks() {
			fmt.Fprintf(stderr, "  %-18s %-10s %s\n", c.id, c.tier, c.title)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg := &config{exe: exe, agent: fs.Args(), keepEnv: keep, timeout: *timeout, jsonPath: *jsonPath, transcripts: *transcripts,
		parallel: *parallel, warm: *warm, llmLog: *llmLog, protocol: *protocol, out: stdout}
	cfg.env = baseEnv(os.Environ(), cfg.keepEnv)
	if len(cfg.agent) == 0 {
		fmt.Fprintln(stderr, "conformance: missing agent command: acp-sidecar conformance [flags] -- AGENT [ARGS...]")
		return 2
	}
	if strings.ContainsRune(cfg.agent[0], filepath.Separator) {
		// Every run starts in a cwd of its own.
		if abs, err := filepath.Abs(cfg.agent[0]); err == nil {
			cfg.agent[0] = abs
		}
	}
	for _, id := range only {
		if !slices.ContainsFunc(checks(), func(c check) bool { return c.id == id }) {
			fmt.Fprintf(stderr, "conformance: --only: no check %q (acp-sidecar conformance -h lists them)\n", id)
			return 2
		}
	}
	cfg.only = only
	if err := checkKeepEnv(keep); err != nil {
		fmt.Fprintf(stderr, "conformance: %v\n", err)
		return 2
	}
	if *homeTemplate != "" {
		abs, err := filepath.Abs(*homeTemplate)
		if fi, serr := os.Stat(abs); err != nil || serr != nil || !fi.IsDir() {
			fmt.Fprintf(stderr, "conformance: --home-template %s: not a directory\n", *homeTemplate)
			return 2
		}
		cfg.homeTemplate = abs
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "conformance: --timeout must be positive")
		return 2
	}
	if *parallel < 1 {
		fmt.Fprintln(stderr, "conformance: --parallel must be at least 1")
		return 2
	}
	if *protocol != protoV1 && *protocol != protoV2 {
		fmt.Fprintf(stderr, "conformance: --protocol %d: the suite speaks ACP 1 or 2\n", *protocol)
		return 2
	}
	if *schemaDir != "" {
		sc, err := acpschema.Load(*schemaDir, *protocol)
		if err != nil {
			fmt.Fprintf(stderr, "conformance: --schema: %v\n", err)
			return 2
		}
		cfg.schema = newSchemaLog(sc)
	}
	if isTerminal(stderr) && !isTerminal(stdout) {
		// The rows go where the person is not looking: say on the
		// terminal what runs and how it ended.
		cfg.progress = stderr
	}
	rep, err := runSuite(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "conformance: %v\n", err)
		return 1
	}
	if cfg.jsonPath != "" {
		if err := writeJSON(cfg.jsonPath, rep); err != nil {
			fmt.Fprintf(stderr, "conformance: %v\n", err)
			return 1
		}
	}
	if rep.Summary.Fail > 0 {
		return 1
	}
	return 0
}

// isTerminal reports whether w is a character device, as a terminal is: the
// progress lines are for a person watching. It asks no ioctl, so the
// suite builds wherever the sidecar does (TCGETS is Linux's alone).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runSuite probes the agent once, in the world every run's world then
// copies (isolate.go), then runs the selected checks, cfg.parallel at a
// time, each with its own agents and sidecars. With cfg.out it prints the
// table as it goes (table.go): the head once the probe is done, each row
// once its check and every check before it in the registry are done, so
// the rows keep the registry's order, and the summary last.
func runSuite(ctx context.Context, cfg *config) (*Report, error) {
	root, err := os.MkdirTemp("", "acp-sidecar-conformance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	if cfg.transcripts == "" {
		if cfg.jsonPath != "" {
			cfg.transcripts = strings.TrimSuffix(cfg.jsonPath, filepath.Ext(cfg.jsonPath)) + ".transcripts"
		} else if cfg.transcripts, err = os.MkdirTemp("", "acp-sidecar-conformance-transcripts-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.transcripts, 0o700); err != nil {
		return nil, fmt.Errorf("transcripts dir: %w", err)
	}
	abs, err := filepath.Abs(cfg.transcripts)
	if err == nil {
		cfg.transcripts = abs
	}

	start := time.Now()
	rep := &Report{
		SchemaVersion: SchemaVersion, Started: start.UTC().Format(time.RFC3339), Sidecar: cfg.exe, Protocol: max(cfg.protocol, protoV1),
		Agent: AgentInfo{Command: cfg.agent}, Transcripts: cfg.transcripts, Checks: []CheckResult{},
	}
	pr, err := warmProbe(ctx, cfg, root)
	if err != nil {
		return nil, err
	}
	rep.Agent.Name, rep.Agent.Title, rep.Agent.Version = pr.info.Name, pr.info.Title, pr.info.Version
	rep.Agent.ProtocolVersion = pr.protocolVersion
	rep.Capabilities = pr.caps
	rep.Config = describeConfig(pr.cfg)

	var sel []check
	for _, ch := range checks() {
		if cfg.only == nil || slices.Contains(cfg.only, ch.id) {
			sel = append(sel, ch)
		}
	}
	tab := newTable(cfg.out)
	tab.head(rep)
	order := newInOrder(len(sel))
	runChecks(ctx, cfg, root, sel, pr, func(ev checkEvent) {
		id := sel[ev.i].id
		if !ev.ended {
			if cfg.progress != nil {
				fmt.Fprintf(cfg.progress, "conformance: %s …\n", id)
			}
			return
		}
		if cfg.progress != nil {
			fmt.Fprintf(cfg.progress, "conformance: %s %s (%.1fs)\n", id, ev.res.Verdict, float64(ev.res.DurationMs)/1000)
		}
		for _, res := range order.add(ev.i, ev.res) {
			rep.Checks = append(rep.Checks, res)
			rep.Summary.count(res.Verdict)
			tab.row(res)
		}
	})
	rep.DurationMs = time.Since(start).Milliseconds()
	tab.foot(rep)
	return rep, nil
}

// warmProbe runs the probe in a fresh world of its own and writes its
// transcript. With cfg.warm that world becomes cfg.template, the one every
// run's world copies: the agent has started and stopped in it once, so a
// cache it fills on its first start is filled (isolate.go).
func warmProbe(ctx context.Context, cfg *config, root string) (probeResult, error) {
	cfg.template = nil // an earlier run's went with its root; this run warms its own
	r, err := newCheckRun(cfg, root, "probe")
	if err != nil {
		return probeResult{}, err
	}
	w, err := newWorld(cfg, filepath.Join(root, "template"))
	if err != nil {
		return probeResult{}, fmt.Errorf("the template world: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	pr, err := probe(pctx, r, w)
	cancel()
	var hung string
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		hung = r.hangReport()
	}
	r.closeAll()
	cfg.schema.take(r)
	transcript := filepath.Join(cfg.transcripts, "probe.jsonl")
	_ = r.writeTranscript(transcript) // the probe's failure below names the file; a missing one is its own answer
	if err != nil {
		return pr, fmt.Errorf("probe (initialize and session/new, directly): %w (transcript %s)%s", err, transcript, hung)
	}
	if cfg.warm {
		cfg.template = w
	}
	return pr, nil
}

// hangReport is what a probe that got no answer in time leaves to read,
// since the run's files go with its temporary directory: each peer's
// transcript, each peer's goroutines (a Go peer, as the fake agent and
// the sidecar are, dumps them on SIGQUIT, then exits), and the suite's
// own, whose reader of the peer may be the one that waits.
func (r *checkRun) hangReport() string {
	var b strings.Builder
	for _, ru := range r.runs {
		fmt.Fprintf(&b, "\n--- %s: transcript\n", ru.name)
		for _, ev := range ru.c.transcript() {
			fmt.Fprintf(&b, "%s %s %s\n", ev.T.UTC().Format(time.RFC3339Nano), ev.Dir, tail(string(ev.Frame), 2<<10))
		}
		if err := quit(ru.c.rc.Pid()); err != nil {
			fmt.Fprintf(&b, "--- %s: no goroutine dump: %v\n", ru.name, err)
			continue
		}
		wctx, cancel := context.WithTimeout(context.Background(), hangDumpBound)
		_, _ = ru.c.rc.Wait(wctx) // its exit: what it wrote to stderr is all in; no exit in time leaves what came
		cancel()
		if ru.errs != nil {
			fmt.Fprintf(&b, "--- %s: stderr, with its goroutines\n%s\n", ru.name, tail(ru.errs.String(), 64<<10))
		}
	}
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	fmt.Fprintf(&b, "--- the suite's goroutines\n%s\n", tail(string(stacks), 64<<10))
	return b.String()
}

// hangDumpBound bounds the wait for a hung peer to write its goroutines
// after SIGQUIT: a peer that is no Go program never exits of it.
const hangDumpBound = 10 * time.Second

// tail is the last n bytes of s, marked as cut when it is.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…[cut] " + s[len(s)-n:]
}

// checkEvent is a worker's word on check i (of runChecks' sel): it
// started, or it ended with res.
type checkEvent struct {
	i     int
	ended bool
	res   CheckResult
}

// runChecks runs sel on cfg.parallel workers and calls report on its own
// goroutine, so one call at a time, as each check starts and as it ends.
// It returns once every worker has exited, after the last check ended.
// The checks marked afterAll (schema) start once every other has ended:
// they judge what the others saw.
//
// Checks share nothing that makes running them side by side unsafe: each
// has its own dir, state dir, worlds (isolate.go) and transcript file; a
// check that kills an agent kills its own sidecar's children (killAgent)
// or its own sidecar's process group (load), found by pid; and an agent's
// LLM is the one mock server, which answers concurrent requests, and
// whose replies depend on the request alone.
func runChecks(ctx context.Context, cfg *config, root string, sel []check, pr probeResult, report func(checkEvent)) {
	var first, last []int
	for i, ch := range sel {
		if ch.afterAll {
			last = append(last, i)
		} else {
			first = append(first, i)
		}
	}
	for _, batch := range [][]int{first, last} {
		runBatch(ctx, cfg, root, sel, batch, pr, report)
	}
}

// runBatch runs the checks of sel at the indices batch, as runChecks.
func runBatch(ctx context.Context, cfg *config, root string, sel []check, batch []int, pr probeResult, report func(checkEvent)) {
	jobs := make(chan int, len(batch))
	for _, i := range batch {
		jobs <- i
	}
	close(jobs)
	events := make(chan checkEvent)
	var wg sync.WaitGroup
	for range max(1, min(cfg.parallel, len(batch))) {
		wg.Go(func() { checkWorker(ctx, cfg, root, sel, pr, jobs, events) })
	}
	for range 2 * len(batch) { // each check starts and ends once
		report(<-events)
	}
	wg.Wait()
}

// checkWorker runs checks from jobs, in the order they come, until there
// are none left.
func checkWorker(ctx context.Context, cfg *config, root string, sel []check, pr probeResult, jobs <-chan int, events chan<- checkEvent) {
	for i := range jobs {
		events <- checkEvent{i: i}
		events <- checkEvent{i: i, ended: true, res: runCheck(ctx, cfg, root, sel[i], pr)}
	}
}

func newCheckRun(cfg *config, root, id string) (*checkRun, error) {
	dir := filepath.Join(root, id)
	r := &checkRun{cfg: cfg, id: id, dir: dir, state: filepath.Join(dir, "state")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return r, nil
}

func runCheck(ctx context.Context, cfg *config, root string, ch check, pr probeResult) (res CheckResult) {
	start := time.Now()
	res = CheckResult{ID: ch.id, Title: ch.title, Tier: string(ch.tier)}
	defer func() { res.DurationMs = time.Since(start).Milliseconds() }()
	if ch.needs != nil {
		if reason := ch.needs(pr); reason != "" {
			res.Verdict, res.Detail = Skip, reason
			return res
		}
	}
	r, err := newCheckRun(cfg, root, ch.id)
	if err != nil {
		res.Verdict, res.Detail = Fail, err.Error()
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	err = func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("check panicked: %v", p)
			}
		}()
		return ch.run(cctx, r, pr)
	}()
	cancel()
	r.closeAll()
	cfg.schema.take(r)
	res.Sides = r.sides
	var se skipError
	var ae absorbedError
	switch {
	case err == nil:
		res.Verdict, res.Detail = Pass, strings.Join(r.notes, "; ")
	case errors.As(err, &se):
		res.Verdict, res.Detail = Skip, se.reason
	case errors.As(err, &ae):
		res.Verdict, res.Detail = Absorbed, ae.detail
	case ch.tier == Advisory:
		res.Verdict, res.Detail = Warn, err.Error()
	default:
		res.Verdict, res.Detail = Fail, err.Error()
	}
	name := ch.id + ".jsonl"
	switch {
	case len(r.runs) > 0:
		if terr := r.writeTranscript(filepath.Join(cfg.transcripts, name)); terr == nil {
			res.Transcript = name
		}
	case r.transcript != "": // a check that started nothing wrote its own (schema)
		res.Transcript = r.transcript
	} // else nothing ran: no transcript
	// The check's worlds hold a copy of the template each; with checks
	// side by side and a large template (opencode's packages), keeping
	// them all until the end would fill the disk. What is left to read is
	// in the transcript. A dir that stays is removed with root.
	_ = os.RemoveAll(r.dir)
	return res
}

// writeTranscript writes every run's frames as the client saw them, then
// each sidecar's --trace and the tail of each run's stderr, as JSON lines
// (see docs/conformance.md, "Reading a failure").
func (r *checkRun) writeTranscript(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	for _, ru := range r.runs {
		for _, ev := range ru.c.transcript() {
			rec := map[string]any{"run": ru.name, "src": "client", "t": ev.T.UTC().Format(time.RFC3339Nano), "dir": ev.Dir}
			if json.Valid(ev.Frame) {
				rec["frame"] = json.RawMessage(ev.Frame)
			} else {
				rec["malformed"] = string(ev.Frame)
			}
			_ = enc.Encode(rec)
		}
		if ru.trace != "" {
			if data, err := os.ReadFile(ru.trace); err == nil {
				for _, line := range strings.Split(string(data), "\n") {
					if json.Valid([]byte(line)) {
						_ = enc.Encode(map[string]any{"run": ru.name, "src": "sidecar-trace", "entry": json.RawMessage(line)})
					}
				}
			}
		}
		if s := ru.errs.String(); s != "" {
			_ = enc.Encode(map[string]any{"run": ru.name, "src": "stderr", "text": s})
		}
	}
	return f.Close()
}

func writeJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
