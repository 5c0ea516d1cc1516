// Package testbin builds the acp-sidecar binary for the tests that run it as
// a real process (the end-to-end, conformance and chaos suites), from the
// working tree, once per test binary.
//
// It owns that build (Build from TestMain, Path in a test, Close after
// m.Run), with the go command of the toolchain that built the test, and
// the two things such tests share: finding the module's root (RepoRoot) and
// stopping a test whose installed part is missing (Missing: a skip on a
// developer's machine, a failure in CI).
//
// It is test code: it imports package testing, only _test.go files import
// it, and it is never in the release build. It never runs the binary it
// builds; each test starts it its own way.
package testbin
