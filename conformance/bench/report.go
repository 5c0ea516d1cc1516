package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets (DESIGN.md, "Speed"; the benchmark issue).
const (
	targetTputRatio = 0.5      // sidecar throughput / byte-copy throughput, at least
	targetAddedP50  = 50.0     // µs the sidecar adds to a round trip's median, at most
	targetRSSSmall  = 30 << 20 // bytes of peak RSS while relaying small frames, below
	targetRecording = 0.9      // recording-on throughput / recording-off throughput, at least
	targetRSSTurns  = 64 << 20 // bytes of peak RSS after the recorded turns, below
	targetRecovery  = 50.0     // ms a prompt that waits for a restarted agent adds to the agent's own start, at most
)

// roundValues is what one round measured, indexed by relayKind.
type roundValues struct {
	small, large [2]tputResult
	p50, p99     [2]time.Duration
	// rec is the recorded turn: [sidecarRelay] with recording on,
	// [byteCopyRelay] with it off.
	rec [2]tputResult
	// recovery is the recovery workload's round (recovery.go).
	recovery recoveryResult
	// several is the several-agents workload's round (several.go): small
	// frames, then large ones.
	several [2][2]tputResult
}

// results collects the rounds and turns them into metrics.
type results struct {
	o      options
	rounds []roundValues
	turns  *turnsResult  // nil: not run
	store  *storeResult  // nil: not run
	remote *remoteResult // nil: not run
}

func newResults(o options) *results { return &results{o: o} }

func (r *results) add(small, large [2]tputResult, rts [2][]time.Duration) {
	v := roundValues{small: small, large: large}
	for k := range rts {
		v.p50[k] = quantile(rts[k], 0.50)
		v.p99[k] = quantile(rts[k], 0.99)
	}
	r.rounds = append(r.rounds, v)
}

// quantile is the nearest-rank quantile q of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// Pair is one round's value for each relay.
type Pair struct {
	Sidecar  float64 `json:"sidecar"`
	ByteCopy float64 `json:"bytecopy"`
}

// Metric is one line of the report. Sidecar and ByteCopy are medians over
// rounds (maxima for peak RSS), Ratio is the median of the rounds' ratios
// sidecar/bytecopy, and Added the median of their differences.
type Metric struct {
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	Sidecar  float64 `json:"sidecar"`
	ByteCopy float64 `json:"bytecopy"`
	Ratio    float64 `json:"ratio"`
	Added    float64 `json:"added,omitempty"`
	Target   string  `json:"target,omitempty"`
	Pass     *bool   `json:"pass,omitempty"` // nil: reported, no target
	Rounds   []Pair  `json:"rounds"`
}

// metric builds a Metric from a per-round value of each relay.
func (r *results) metric(name, unit string, peak bool, f func(v roundValues, k relayKind) float64) Metric {
	m := Metric{Name: name, Unit: unit}
	var s, b, ratio, added []float64
	for _, v := range r.rounds {
		p := Pair{Sidecar: f(v, sidecarRelay), ByteCopy: f(v, byteCopyRelay)}
		m.Rounds = append(m.Rounds, p)
		s, b = append(s, p.Sidecar), append(b, p.ByteCopy)
		if p.ByteCopy != 0 {
			ratio = append(ratio, p.Sidecar/p.ByteCopy)
		}
		added = append(added, p.Sidecar-p.ByteCopy)
	}
	m.Sidecar, m.ByteCopy, m.Ratio, m.Added = median(s), median(b), median(ratio), median(added)
	if peak {
		m.Sidecar, m.ByteCopy = slices.Max(s), slices.Max(b)
		if m.ByteCopy != 0 {
			m.Ratio = m.Sidecar / m.ByteCopy
		}
		m.Added = m.Sidecar - m.ByteCopy
	}
	return m
}

func verdict(ok bool) *bool { return &ok }

func perSecond(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

// metrics are the report's lines, in the order printed.
func (r *results) metrics() []Metric {
	if len(r.rounds) == 0 {
		// -only store or remote: no relay rounds ran.
		var ms []Metric
		if r.store != nil {
			ms = append(ms, storeMetrics(r.store)...)
		}
		if r.remote != nil {
			ms = append(ms, remoteMetrics(r.remote)...)
		}
		return ms
	}
	small := r.metric("small_throughput", "frames/s", false, func(v roundValues, k relayKind) float64 {
		return perSecond(float64(v.small[k].frames), v.small[k].elapsed)
	})
	small.Target = fmt.Sprintf(">= %.2fx bytecopy", targetTputRatio)
	small.Pass = verdict(small.Ratio >= targetTputRatio)

	large := r.metric("large_throughput", "MiB/s", false, func(v roundValues, k relayKind) float64 {
		return perSecond(float64(v.large[k].bytes)/(1<<20), v.large[k].elapsed)
	})
	large.Target = small.Target
	large.Pass = verdict(large.Ratio >= targetTputRatio)

	p50 := r.metric("round_trip_p50", "µs", false, func(v roundValues, k relayKind) float64 {
		return float64(v.p50[k]) / float64(time.Microsecond)
	})
	p50.Target = fmt.Sprintf("added <= %g µs", targetAddedP50)
	p50.Pass = verdict(p50.Added <= targetAddedP50)

	p99 := r.metric("round_trip_p99", "µs", false, func(v roundValues, k relayKind) float64 {
		return float64(v.p99[k]) / float64(time.Microsecond)
	})

	rssSmall := r.metric("peak_rss_small", "MiB", true, func(v roundValues, k relayKind) float64 {
		return float64(v.small[k].hwm) / (1 << 20)
	})
	rssLarge := r.metric("peak_rss_large", "MiB", true, func(v roundValues, k relayKind) float64 {
		return float64(v.large[k].hwm) / (1 << 20)
	})
	if rssSmall.Sidecar > 0 { // 0: no /proc, nothing measured
		rssSmall.Target = fmt.Sprintf("< %d MiB", targetRSSSmall>>20)
		rssSmall.Pass = verdict(rssSmall.Sidecar*(1<<20) < targetRSSSmall)
	}

	cpu := r.metric("cpu_per_small_frame", "ns", false, func(v roundValues, k relayKind) float64 {
		if v.small[k].frames == 0 {
			return 0
		}
		return float64(v.small[k].cpu) / float64(v.small[k].frames)
	})
	var ms []Metric
	for _, m := range []struct {
		Metric
		workload string
	}{{small, wSmall}, {large, wLarge}, {p50, wRT}, {p99, wRT}, {rssSmall, wSmall}, {rssLarge, wLarge}, {cpu, wSmall}} {
		if r.o.only.has(m.workload) {
			ms = append(ms, m.Metric)
		}
	}
	if len(r.rounds) > 0 && r.rounds[0].rec[sidecarRelay].frames > 0 {
		rec := r.metric("recording_throughput", "frames/s", false, func(v roundValues, k relayKind) float64 {
			return perSecond(float64(v.rec[k].frames), v.rec[k].elapsed)
		})
		rec.Target = fmt.Sprintf(">= %.2fx --record=false", targetRecording)
		rec.Pass = verdict(rec.Ratio >= targetRecording)
		ms = append(ms, rec)
	}
	if len(r.rounds) > 0 && r.rounds[0].recovery.viaSidecar > 0 {
		rc := r.metric("recovery", "ms", false, func(v roundValues, k relayKind) float64 {
			if k == sidecarRelay {
				return float64(v.recovery.viaSidecar) / float64(time.Millisecond)
			}
			return float64(v.recovery.agentAlone) / float64(time.Millisecond)
		})
		rc.Target = fmt.Sprintf("added <= %g ms", targetRecovery)
		rc.Pass = verdict(rc.Added <= targetRecovery)
		ms = append(ms, rc)
	}
	if len(r.rounds) > 0 && r.rounds[0].several[0][sidecarRelay].frames > 0 {
		for i, name := range []string{"several_agents_small", "several_agents_large"} {
			unit, per := "frames/s", func(t tputResult) float64 { return float64(t.frames) }
			if i == 1 {
				unit, per = "MiB/s", func(t tputResult) float64 { return float64(t.bytes) / (1 << 20) }
			}
			m := r.metric(name, unit, false, func(v roundValues, k relayKind) float64 {
				return perSecond(per(v.several[i][k]), v.several[i][k].elapsed)
			})
			m.Target = fmt.Sprintf(">= %.2fx bytecopy", targetTputRatio)
			m.Pass = verdict(m.Ratio >= targetTputRatio)
			ms = append(ms, m)
		}
	}
	if r.store != nil {
		ms = append(ms, storeMetrics(r.store)...)
	}
	if r.remote != nil {
		ms = append(ms, remoteMetrics(r.remote)...)
	}
	if t := r.turns; t != nil && t.hwm > 0 {
		m := Metric{Name: fmt.Sprintf("peak_rss_%d_turns", t.turns), Unit: "MiB", Sidecar: float64(t.hwm) / (1 << 20),
			Target: fmt.Sprintf("< %d MiB", targetRSSTurns>>20)}
		m.Pass = verdict(t.hwm < targetRSSTurns)
		ms = append(ms, m)
	}
	return ms
}

func (r *results) pass() bool {
	for _, m := range r.metrics() {
		if m.Pass != nil && !*m.Pass {
			return false
		}
	}
	return true
}

// roundSummary is one progress line for the round just measured.
func (r *results) roundSummary(round int) string {
	v := r.rounds[round]
	ratio := func(t [2]tputResult) float64 {
		return float64(t[byteCopyRelay].elapsed) / float64(t[sidecarRelay].elapsed)
	}
	var parts []string
	if r.o.only.has(wSmall) {
		parts = append(parts, fmt.Sprintf("small %.2fx", ratio(v.small)))
	}
	if r.o.only.has(wLarge) {
		parts = append(parts, fmt.Sprintf("large %.2fx", ratio(v.large)))
	}
	if r.o.only.has(wRT) {
		parts = append(parts, fmt.Sprintf("round trip p50 %s vs %s", fmtMicros(v.p50[sidecarRelay]), fmtMicros(v.p50[byteCopyRelay])))
	}
	if r.o.only.has(wSmall) {
		parts = append(parts, fmt.Sprintf("peak RSS %.1f MiB", float64(v.small[sidecarRelay].hwm)/(1<<20)))
	}
	if v.rec[sidecarRelay].elapsed > 0 {
		// Recording off over on: the throughput ratio.
		parts = append(parts, fmt.Sprintf("recording %.2fx", ratio(v.rec)))
	}
	if v.several[0][sidecarRelay].elapsed > 0 {
		parts = append(parts, fmt.Sprintf("several agents small %.2fx, large %.2fx", ratio(v.several[0]), ratio(v.several[1])))
	}
	if rc := v.recovery; rc.viaSidecar > 0 {
		parts = append(parts, fmt.Sprintf("recovery %s vs the agent alone %s", rc.viaSidecar.Round(100*time.Microsecond), rc.agentAlone.Round(100*time.Microsecond)))
	}
	return strings.Join(parts, ", ")
}

func fmtMicros(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

func (r *results) header() string {
	o := r.o
	h := fmt.Sprintf("acp-sidecar bench: %d rounds on %s/%s, %d CPUs; small: %d × %d B, large: %d × %d B (median of %d runs each way a round), %d round trips; recording: a turn of %d chunks (median of %d runs each way a round), %d turns of %d",
		o.rounds, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), o.small, o.smallSize, o.large, o.largeSize, o.tputRuns, o.roundTrips, o.recordN, o.recordRuns, o.turns, o.turnChunks)
	if o.only != nil {
		h += "; only " + o.only.String()
	}
	return h
}

func (r *results) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, r.header())
	fmt.Fprintln(tw, "RATIO is sidecar / bytecopy; each value is the median over rounds (peak RSS: the maximum)")
	fmt.Fprintln(tw, "recording_*: SIDECAR records (the default), BYTECOPY is the same sidecar with --record=false")
	if r.o.only.has(wSeveral) {
		fmt.Fprintln(tw, "several_agents_*: SIDECAR runs two named agents, the default one streaming, BYTECOPY the same agent alone; both checked byte for byte")
	}
	if r.store != nil {
		fmt.Fprintln(tw, "store_*: SIDECAR is the fleet's store on the -postgres server, BYTECOPY the disk store (badger); store_recording_*: --store on PostgreSQL, against --record=false")
	}
	if r.remote != nil {
		fmt.Fprintln(tw, "remote_*_round_trip: SIDECAR is serve over WebSocket or HTTP/SSE, BYTECOPY the sidecar on stdio; remote_*_throughput: SIDECAR is serve, BYTECOPY the ACP SDK's own AcpServer on the same agent (bench turns); remote_reconnect: a WebSocket's dial to its first replayed message")
	}
	if r.o.only.has(wRecovery) {
		fmt.Fprintln(tw, "recovery: SIDECAR is the agent's SIGKILL to the answer of a prompt sent at once, BYTECOPY the agent alone: start, initialize, session/new, the prompt")
	}
	fmt.Fprintln(tw, "METRIC\tSIDECAR\tBYTECOPY\tRATIO\tTARGET\tRESULT")
	for _, m := range r.metrics() {
		target, result := m.Target, "-"
		if m.Pass != nil {
			result = "MISS"
			if *m.Pass {
				result = "PASS"
			}
		}
		if m.Unit == "µs" {
			target = fmt.Sprintf("%s (added %+.1f µs)", target, m.Added)
			if m.Target == "" {
				target = fmt.Sprintf("(added %+.1f µs)", m.Added)
			}
		}
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2fx\t%s\t%s\n", m.Name, fmtValue(m.Sidecar, m.Unit), fmtValue(m.ByteCopy, m.Unit), m.Ratio, target, result)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func fmtValue(v float64, unit string) string {
	if unit == "frames/s" {
		return fmt.Sprintf("%.3f M frames/s", v/1e6)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// report is the -json output.
type report struct {
	Header  string   `json:"header"`
	Config  any      `json:"config"`
	Metrics []Metric `json:"metrics"`
	Pass    bool     `json:"pass"`
}

func (r *results) writeJSON(w io.Writer) error {
	o := r.o
	rep := report{
		Header: r.header(),
		Config: map[string]any{
			"rounds": o.rounds, "small_frames": o.small, "small_size": o.smallSize,
			"large_frames": o.large, "large_size": o.largeSize, "round_trips": o.roundTrips,
			"record_chunks": o.recordN, "record_runs": o.recordRuns, "tput_runs": o.tputRuns, "turns": o.turns, "turn_chunks": o.turnChunks,
			"goos": runtime.GOOS, "goarch": runtime.GOARCH, "cpus": runtime.NumCPU(),
		},
		Metrics: r.metrics(),
		Pass:    r.pass(),
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
