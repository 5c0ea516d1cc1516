// Package e2e runs real ACP agents, offline, against conformance/mockllm, to
// pin down what they actually send and to compare a session run directly
// with the same session run through the sidecar.
//
// The package holds only tests. The agents are not vendored: run
// scripts/e2e-setup.sh once to install them under .cache/e2e. Without them
// the tests skip, except in CI (CI=true), where they fail.
package e2e
