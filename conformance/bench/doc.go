// Package bench is `acp-sidecar bench`: it measures the relay against a
// plain byte-copy relay in the same run and reports each metric against that
// baseline (a ratio, or what the sidecar adds), never a bare duration.
//
// `acp-sidecar bench` runs the real binary as a process, the way an editor
// does: `acp-sidecar --state-dir TMP -- AGENT`. Its baseline is
// `acp-sidecar bench bytecopy -- AGENT`, which starts the agent the same way
// and copies bytes both ways with io.CopyBuffer at the relay's buffer size.
// The agents are hidden modes of the same binary (`bench gen`, `bench
// echo`), so both paths have the same processes and pipes and only the
// relay code differs. The two are run alternately, round after round, and
// each metric is the median over rounds.
//
// Metrics and targets (DESIGN.md, "Speed"; ../shared/go-libs.md §3):
//   - throughput of small agent_message_chunk notifications, ≥ 0.5× byte copy;
//   - throughput of multi-MiB tool_call_update frames, ≥ 0.5× byte copy;
//     each round takes the median of several runs each way (-tput-runs), as
//     one run is a fraction of a second;
//   - round-trip latency of small requests through an echo agent: p50 and
//     p99, and what the sidecar adds to the p50, ≤ 50 µs;
//   - the relay's peak RSS (VmHWM) while relaying small frames, < 30 MiB;
//   - recording: small chunks streamed inside a running turn, so the
//     recorder claims and records every one, with recording on against the
//     same sidecar with --record=false, ≥ 0.9×; each round takes the median
//     of several runs each way (-record-runs), as one run is a few
//     milliseconds;
//   - the sidecar's peak RSS after 10,000 short recorded turns with a disk
//     store, < 64 MiB;
//   - recovery: the agent SIGKILLed between turns and a prompt sent at once;
//     the time from the kill to its answer, against the agent's own start,
//     initialize, session/new and prompt run directly, adds <= 50 ms;
//   - several agents: small and multi-MiB frames through a sidecar with two
//     named agents (the switchboard), against the byte copy around one,
//     ≥ 0.5× each; both streams are checked byte for byte (several.go).
//
// The store workload (-only store, store.go) is the one that opens stores in
// process: the fleet's store on the PostgreSQL that -postgres names, against
// the disk store of one host.
//
// It never runs the relay in process and never imports intercept/: what it
// measures is the binary an editor starts, and of the sidecar's own packages
// it uses only proxy's framing (for its agents and its byte copy) and
// state's stores. It never starts a PostgreSQL itself: the tests' throwaway
// server (state/pgtest) is test code and stays out of the release build.
// Its tests check the machinery (frame sizes, medians, flags, workload
// selection), never a measured time.
package bench
