package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// options are the flags of `acp-sidecar bench`.
type options struct {
	rounds     int
	small      int
	smallSize  int
	large      int
	largeSize  int
	roundTrips int
	recordN    int
	recordRuns int
	tputRuns   int
	turns      int
	turnChunks int
	only       workloads // nil: all
	quick      bool
	json       bool
	keep       bool
	timeout    time.Duration
	sidecar    stringList
	postgres   string // the store workload's server (-postgres)
	sdk        string // the remote workload's ACP SDK (-sdk)
}

// quickOptions are what -quick changes, unless the flag is given too.
var quickOptions = map[string]string{
	"rounds":      "3",
	"n":           "300000",
	"large":       "16",
	"rt":          "2000",
	"record-n":    "5000",
	"record-runs": "3",
	"tput-runs":   "1",
	"turns":       "2000",
}

// The workloads of a round, for -only.
const (
	wSmall     = "small"     // small_throughput, peak_rss_small, cpu_per_small_frame
	wLarge     = "large"     // large_throughput, peak_rss_large
	wRT        = "rt"        // round_trip_p50, round_trip_p99
	wRecording = "recording" // recording_throughput
	wTurns     = "turns"     // peak_rss_N_turns
	wRecovery  = "recovery"  // recovery
	wSeveral   = "several"   // several_agents_small, several_agents_large
	wStore     = "store"     // store_*: only when named (it needs PostgreSQL; store.go)
	wRemote    = "remote"    // remote_*: only when named (it needs node and the ACP SDK; remote.go)
)

var allWorkloads = []string{wSmall, wLarge, wRT, wRecording, wTurns, wRecovery, wSeveral, wStore, wRemote}

// workloads is the set -only names; a nil set is every workload.
type workloads map[string]bool

func (w workloads) has(name string) bool {
	return w == nil && name != wStore && name != wRemote || w[name]
}

// storeOnly says -only names the store workload alone: no relay rounds.
func (w workloads) storeOnly() bool {
	for name := range w {
		if name != wStore && name != wRemote {
			return false
		}
	}
	return len(w) > 0
}

func (w *workloads) String() string {
	var names []string
	for _, n := range allWorkloads {
		if (*w)[n] {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

func (w *workloads) Set(v string) error {
	if *w == nil {
		*w = workloads{}
	}
	for _, name := range strings.Split(v, ",") {
		if !slices.Contains(allWorkloads, name) {
			return fmt.Errorf("unknown workload %q (have %s)", name, strings.Join(allWorkloads, ", "))
		}
		(*w)[name] = true
	}
	return nil
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("acp-sidecar bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; each runs every workload through both relays, in alternating order")
	fs.IntVar(&o.small, "n", 1_000_000, "small frames per throughput run")
	fs.IntVar(&o.smallSize, "size", 229, "bytes per small frame (agent_message_chunk), without the '\\n'")
	fs.IntVar(&o.large, "large", 40, "large frames per throughput run")
	fs.IntVar(&o.largeSize, "large-size", 5<<20, "bytes per large frame (tool_call_update with base64 data)")
	fs.IntVar(&o.roundTrips, "rt", 20_000, "sequential round trips per latency run")
	fs.IntVar(&o.recordN, "record-n", 20_000, "chunks in the recorded turn of the recording run")
	fs.IntVar(&o.recordRuns, "record-runs", 5, "recording runs each way in each round, in alternating order; the round takes the median of each way")
	fs.IntVar(&o.tputRuns, "tput-runs", 3, "throughput runs (small, large, several) each way in each round, in alternating order; the round takes the median of each way")
	fs.IntVar(&o.turns, "turns", 10_000, "short recorded turns for the RSS run (0: skip it)")
	fs.IntVar(&o.turnChunks, "turn-chunks", 20, "chunks per turn of the RSS run")
	fs.Var(&o.only, "only", "run only these workloads, comma-separated, of "+strings.Join(allWorkloads, ", ")+" (default: all), e.g. -only recording -rounds 15")
	fs.BoolVar(&o.quick, "quick", false, "fewer frames and rounds, for CI: -rounds "+quickOptions["rounds"]+" -n "+quickOptions["n"]+" -large "+quickOptions["large"]+" -rt "+quickOptions["rt"]+" -tput-runs "+quickOptions["tput-runs"])
	fs.BoolVar(&o.json, "json", false, "print the results as JSON instead of a table")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory with the sidecar's log")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "limit for one run of one relay")
	fs.StringVar(&o.sdk, "sdk", filepath.Join(".cache", "e2e", "sdk-client"), "for -only remote: the folder whose node_modules holds @agentclientprotocol/sdk 2.4.0 and ws (scripts/e2e-setup.sh sdk prints it)")
	fs.StringVar(&o.postgres, "postgres", "", "for -only store: a postgres:// URL of a PostgreSQL server the store workload may create (and drops) databases in; scripts/bench-store starts one for the run")
	fs.Var(&o.sidecar, "sidecar-flag", "pass a flag to the measured sidecar, such as -sidecar-flag=--log-level=debug (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: acp-sidecar bench [flags]\n\n"+
			"Measures the relay against a plain byte-copy relay run alternately in the\n"+
			"same run and prints each metric as a ratio. Exit status 0: every target met;\n"+
			"1: a target missed; 2: bad flags or a failed run.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickOptions {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return o, fmt.Errorf("-quick: %w", err)
				}
			}
		}
	}
	switch {
	case o.rounds < 1:
		return o, fmt.Errorf("-rounds %d: need at least 1", o.rounds)
	case o.small < 1 || o.large < 1 || o.roundTrips < 1 || o.recordN < 1 || o.recordRuns < 1 || o.tputRuns < 1:
		return o, errors.New("-n, -large, -rt, -record-n, -record-runs and -tput-runs must be at least 1")
	case o.turns < 0 || o.turnChunks < 1:
		return o, errors.New("-turns must be at least 0 and -turn-chunks at least 1")
	case o.smallSize < minFrameSize(kindChunk):
		return o, fmt.Errorf("-size %d: the smallest chunk frame is %d bytes", o.smallSize, minFrameSize(kindChunk))
	case o.largeSize < minFrameSize(kindImage):
		return o, fmt.Errorf("-large-size %d: the smallest image frame is %d bytes", o.largeSize, minFrameSize(kindImage))
	}
	return o, nil
}

// Main runs `acp-sidecar bench`. exe is the acp-sidecar binary to measure.
// Its first argument may name a hidden mode, which the measurement itself
// starts as a process: `gen` and `echo` are the agents, `bytecopy` is the
// baseline relay. The modes use the process's own stdin.
func Main(ctx context.Context, exe string, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "gen":
			return genMain(args[1:], os.Stdin, stdout, stderr)
		case "echo":
			return echoMain(args[1:], os.Stdin, stdout, stderr)
		case "turns":
			return turnsMain(args[1:], os.Stdin, stdout, stderr)
		case "bytecopy":
			return byteCopyMain(args[1:], os.Stdin, stdout, stderr)
		}
	}
	o, err := parseOptions(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "acp-sidecar-bench-")
	if err != nil {
		fmt.Fprintf(stderr, "bench: temp dir: %v\n", err)
		return 2
	}
	if o.keep {
		fmt.Fprintf(stderr, "bench: keeping %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	r := &runner{exe: exe, dir: dir, timeout: o.timeout, extra: o.sidecar}
	res, err := measure(ctx, r, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	if o.json {
		err = res.writeJSON(stdout)
	} else {
		err = res.writeTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	if !res.pass() {
		return 1
	}
	return 0
}

// measure runs every workload through both relays, o.rounds times, after one
// short warm-up of each that is not counted (it pages the binary in).
func measure(ctx context.Context, r *runner, o options, progress io.Writer) (*results, error) {
	res := newResults(o)
	if o.only.has(wStore) {
		st, err := r.storeWorkload(ctx, o, progress)
		if err != nil {
			return nil, err
		}
		res.store = st
	}
	if o.only.has(wRemote) {
		rm, err := r.remoteWorkload(ctx, o, progress)
		if err != nil {
			return nil, err
		}
		res.remote = rm
	}
	if o.only.storeOnly() {
		return res, nil
	}
	for _, k := range []relayKind{byteCopyRelay, sidecarRelay} {
		if _, err := r.throughput(ctx, k, kindChunk, min(o.small, 10_000), o.smallSize); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	for round := range o.rounds {
		// Alternate which relay goes first, so a drift in the machine's
		// speed over a round (thermal, a neighbour) favours neither.
		order := []relayKind{byteCopyRelay, sidecarRelay}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		var small, large [2]tputResult
		if o.only.has(wSmall) {
			var err error
			if small, err = medianPair(order, o.tputRuns, func(k relayKind) (tputResult, error) {
				return r.throughput(ctx, k, kindChunk, o.small, o.smallSize)
			}); err != nil {
				return nil, fmt.Errorf("round %d: small frames: %w", round+1, err)
			}
		}
		if o.only.has(wLarge) {
			var err error
			if large, err = medianPair(order, o.tputRuns, func(k relayKind) (tputResult, error) {
				return r.throughput(ctx, k, kindImage, o.large, o.largeSize)
			}); err != nil {
				return nil, fmt.Errorf("round %d: large frames: %w", round+1, err)
			}
		}
		var rts [2][]time.Duration
		for _, k := range order {
			if !o.only.has(wRT) {
				break
			}
			var err error
			if rts[k], err = r.roundTrips(ctx, k, o.roundTrips); err != nil {
				return nil, fmt.Errorf("round %d: round trips: %w", round+1, err)
			}
		}
		// Recording off and on are both the sidecar, in the same order
		// as the relays above: off stands where bytecopy does.
		var rec [2]tputResult
		if o.only.has(wRecording) {
			var err error
			if rec, err = r.recordingRound(ctx, order, o.recordRuns, o.recordN, o.smallSize); err != nil {
				return nil, fmt.Errorf("round %d: %w", round+1, err)
			}
		}
		var several [2][2]tputResult // [small, large][relay]
		for i, w := range []struct {
			kind    string
			n, size int
		}{{kindChunk, o.small, o.smallSize}, {kindImage, o.large, o.largeSize}} {
			if !o.only.has(wSeveral) {
				break
			}
			var err error
			if several[i], err = medianPair(order, o.tputRuns, func(k relayKind) (tputResult, error) {
				return r.several(ctx, k, w.kind, w.n, w.size)
			}); err != nil {
				return nil, fmt.Errorf("round %d: several agents, %s frames: %w", round+1, w.kind, err)
			}
		}
		var rc recoveryResult
		if o.only.has(wRecovery) {
			var err error
			if rc, err = r.recoveryRound(ctx, order); err != nil {
				return nil, fmt.Errorf("round %d: %w", round+1, err)
			}
		}
		res.add(small, large, rts)
		res.rounds[len(res.rounds)-1].rec = rec
		res.rounds[len(res.rounds)-1].recovery = rc
		res.rounds[len(res.rounds)-1].several = several
		fmt.Fprintf(progress, "bench: round %d/%d: %s\n", round+1, o.rounds, res.roundSummary(round))
	}
	if o.turns > 0 && o.only.has(wTurns) {
		t, err := r.manyTurns(ctx, o.turns, o.turnChunks)
		if err != nil {
			return nil, fmt.Errorf("%d turns: %w", o.turns, err)
		}
		res.turns = &t
		fmt.Fprintf(progress, "bench: %d recorded turns in %s, peak RSS %.1f MiB\n", t.turns, t.elapsed.Round(time.Millisecond), float64(t.hwm)/(1<<20))
	}
	return res, nil
}
