// Package mockllm is a mock of the Anthropic Messages API for end-to-end tests.
//
// Real ACP agents such as claude-agent-acp call the Anthropic API for every
// turn. Pointing them (ANTHROPIC_BASE_URL) at this mock lets tests run them
// offline and deterministically, and the mock's request log shows what the
// agent really sent: which model it asked for, its system prompt, and whether
// a handoff text reached the LLM. See the project's ACP notes (acp/agents.md), "Running
// claude-agent-acp offline".
//
// The mock answers:
//   - HEAD / (the agent's connectivity preflight) with 200;
//   - POST /v1/messages (with or without ?beta=true) with a deterministic reply,
//     as an SSE stream when the body says "stream": true and as JSON otherwise;
//   - POST /v1/messages/count_tokens with a rough token count;
//   - anything else with 404 (405 for a known path with the wrong method).
//
// Every request, answered or not, is recorded and can be read back with
// [Server.Requests] or written as JSON lines to [Options.Log].
//
// It never listens anywhere but loopback: tests must not reach the network.
package mockllm
