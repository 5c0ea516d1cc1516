// Package suite is `acp-sidecar conformance` (docs/conformance.md): it
// checks that an agent does what ACP asks, that the sidecar in front of it
// changes none of that, and that the sidecar keeps its own promises. Each
// check starts a fresh agent, directly and behind a fresh sidecar (this same
// binary, with its own --state-dir and --trace), each run in a world of its
// own (isolate.go), and its verdict is pass, fail, skip, warn or absorbed.
// A table row is printed as soon as a check is known (table.go), and --json
// writes the report (report.go, report.schema.json).
//
// It owns the checks (spec.go: what the protocol asks of every agent;
// promises.go, rewind.go, transparency.go: what the sidecar promises), its
// own ACP client over acpclient's raw pipes in v1 and v2 (conn.go,
// proto.go), and the numbering of made-up ids that lets two runs' frames be
// compared (normalize.go).
//
// It is the oracle, so it never imports intercept/ or state/: it speaks ACP
// from the schema and its own code, and judges the sidecar only by what
// crosses the pipes, by the sidecar's --trace and by what `acp-sidecar show
// --json` prints. Of proxy/ it uses only the names of a frame's direction.
package suite
