// Package mockllm is a mock LLM API for end-to-end tests: the Anthropic
// Messages API and the OpenAI Responses API, on one server.
//
// Real ACP agents call an LLM API for every turn: claude-agent-acp the
// Anthropic API, codex-acp (through codex) the Responses API. Pointing them
// at this mock (ANTHROPIC_BASE_URL; a custom model provider with
// wire_api = "responses" in codex's config.toml) lets tests run them
// offline and deterministically, and the mock's request log shows what the
// agent really sent: which model and reasoning effort it asked for, its
// system prompt, and whether a handoff text reached the LLM. See the
// project's ACP notes (acp/agents.md), "Running claude-agent-acp offline".
//
// The mock answers:
//   - HEAD / (the agent's connectivity preflight) with 200;
//   - POST /v1/messages (with or without ?beta=true) with a deterministic reply,
//     as an SSE stream when the body says "stream": true and as JSON otherwise;
//   - POST /v1/messages/count_tokens with a rough token count;
//   - POST /v1/responses with the same reply as a Responses API answer: an
//     SSE stream (response.created … response.completed) when the body says
//     "stream": true, the response object otherwise;
//   - anything else with 404 (405 for a known path with the wrong method).
//
// Every request, answered or not, is recorded and can be read back with
// [Server.Requests] or written as JSON lines to [Options.Log]. A turn
// request's record carries the model and effort it asked for; its
// conversation, in either API's shape, is read with [Request.Texts],
// [Request.UserTexts] and [Request.LastUserText].
//
// It never listens anywhere but loopback: tests must not reach the network.
package mockllm
