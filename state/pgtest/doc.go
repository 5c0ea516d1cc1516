// Package pgtest starts a throwaway PostgreSQL server for a test binary: a
// real server, from the binaries on the machine, in a temporary directory,
// on a unix socket only (and 127.0.0.1 when a test asks, Options.TCP). The
// fleet's tests use it so that what they check is what a real database does
// (locks, now(), a killed server), not a mock. It owns the server's life
// (Start, Kill, Restart, Stop, For), a database per test (CreateDB), and
// Proxy, which stands between a client and the server and breaks the way
// networks do.
//
// It is test-only: only _test.go files import it, and it is never in the
// release build (`go list -deps ./cmd/acp-sidecar` does not list it); the
// bench's store workload measures on a server the user names instead. It
// never uses a server already running on the machine: each Start runs
// initdb in a new directory. It imports no other package of this module, so
// any test may use it. It runs on unix only: on Windows
// it builds, for what imports it, and Start says it cannot run there
// (pgtest_windows.go).
package pgtest
