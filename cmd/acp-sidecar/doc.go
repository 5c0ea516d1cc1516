// Command acp-sidecar sits where an editor would launch an ACP agent and
// relays between them, keeping a record of each session so that it can
// rebuild the agent's side after a reset, crash or rollback.
//
//	acp-sidecar [flags] -- AGENT [ARGS...]
//	acp-sidecar COMMAND [flags]
//
// This package owns the command line and the wiring, in the order a reader
// meets them: the flags (app.go), then the options, the log and the store,
// then for each agent its core, its chain and its relay (one agent on the
// sidecar's stdio; several behind the switchboard), handed to agenthost,
// which owns the agent's process life and the order of teardown.
// buildChain in chain.go is the one place the chain of stages is
// assembled, in plain sight; nothing registers itself from init. The
// commands on the record are here too (sessions, show, handoff, delete,
// ui); show, handoff and ui gather a session through internal/sessionview.
// fakeagent, bench, conformance, demo and mockllm run conformance/ packages
// from this same binary, so the tests and a user need one build.
//
// It never reads a relayed frame nor decides a process's life: framing and
// ids are proxy/'s, what a frame means is intercept/'s, and when an agent
// starts, restarts and stops is agenthost/'s. In the relay, stdout
// carries ACP alone: help, errors and notices go to stderr, and the log to
// a file (--log-file, else sidecar.log in the state dir).
package main
