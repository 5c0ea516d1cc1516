// Package remote carries ACP over the network: Streamable HTTP (POST, SSE
// GET streams, DELETE) and WebSocket text frames on one listener, wire
// compatible with @agentclientprotocol/sdk 2.4.0's experimental transport,
// plus what that transport lacks for a session to survive the network: a
// cursor on every server message, streams that resume from a cursor
// (Last-Event-ID, or a first WebSocket frame stream/resume), and a
// connection that outlives its streams for a detach TTL.
//
// It owns the connections, their retained output and the bearer token
// check. It knows framing, ids and session ids, never ACP semantics: each
// connection is a pair of newline-delimited pipes to a host that
// Config.Open runs (the sidecar's chain, with its own agent), the same
// pipes the sidecar's stdio are. Dial is the client side the stdio bridge
// (acp-sidecar connect) uses.
package remote
