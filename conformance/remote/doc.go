// Package remote holds the tests of `acp-sidecar serve` and `acp-sidecar
// connect`: real processes on loopback, the ACP SDK's own HTTP and
// WebSocket clients (testdata/sdkclient.mjs), the fake agent and the real
// agents on the mock LLM, and a TCP fault proxy between client and server.
package remote
