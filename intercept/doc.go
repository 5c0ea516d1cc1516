// Package intercept holds everything ACP-aware that happens to a frame in
// flight: observing, rewriting, answering or holding it. The proxy knows
// framing and ids; this package knows what the frames mean.
//
// # A frame's way through
//
// The relay reads a line, peeks its envelope (proxy.Scan) and hands it to
// the Chain, its proxy.Hook. The chain offers the frame to each stage in
// the order cmd lists them (cmd/acp-sidecar buildChain):
//
//	client ─▶ relay ─▶ Lifeline ─▶ Commands ─▶ record ─▶ IDs ─▶ Tracker ─▶ agent
//	client ◀─ relay ◀─ (the same stages, for the agent's frames)  ◀─────── agent
//
// Each stage in turn:
//
//   - Lifeline (lifeline.go, wait.go) gates client requests on the agent's
//     life. A request that must wait (the agent restarts, its session is
//     stale or being rebuilt) gets proxy.Hold: the relay keeps its place,
//     the request waits in the room in arrival order, and then goes on
//     through the stages after the lifeline (the chain hands every holder
//     the rest of itself). It also decides session/load, resume and list
//     where the record knows better than the agent (recover.go), and keeps
//     the replay of a load the sidecar made from the client. A request the
//     dead agent never read comes back through proxy.UnsentHook and waits
//     the same way.
//   - Commands (commands.go) is the sidecar's own surface: slash commands,
//     `_sidecar/*` methods (answered with proxy.Defer), the capabilities it
//     adds to initialize, its command list, and the gate that keeps a
//     prompt off a session whose config could not be restored. What it
//     answers is never recorded and never reaches the agent.
//   - The record (*Recorder, record.go, chunks.go) copies what it claims
//     onto a bounded queue; one goroutine decodes it and writes the store.
//     A response that completes a config change or a turn is held until its
//     write lands. Message chunks skip the queue (chunks.go).
//   - IDs (ids.go) keeps the client's session id stable while the native
//     session behind it is replaced, and holds an agent frame for a session
//     the sidecar is still creating.
//   - Tracker (lifeline.go) notes the requests that really reach the agent,
//     so a dying agent's pending requests can be answered.
//
// A stage's Claims looks only at the peeked envelope; most frames are
// claimed by no one and cost nothing more. Streamed chunks, the commonest
// frames by far, are offered only to the stages that say they may claim
// one (chunkScoped, chunkGated, chunkTaker in chain.go).
//
// # Who owns what
//
//   - The record's goroutine owns the sessions (Recorder.sessions); others
//     reach them through Recorder.do.
//   - The table (table.go) is what the relay goroutines must know at once:
//     native ids, busy, stale and blocked sessions, armed handoffs. One lock.
//   - life (lifeline.go) is the agent's phase and generation, shared by the
//     lifeline, the tracker and the engine; watch (wait.go) waits on it.
//   - The engine (engine.go, restore.go) talks to the agent to build a
//     native session and put a config on it, and runs an attempt again when
//     the agent dies under it. It never touches the record: the Recorder's
//     rebuilds (rebuild.go, rollback.go, recover.go, switch.go) take a
//     snapshot, ask the engine, and settle what it built.
//   - The switchboard (switchboard.go, move.go) puts several agents, each
//     behind a relay and a Recorder of its own, behind one client.
//   - wire/ is what ACP frames look like: method names, payload readers and
//     byte-span edits. proxy/codes.go names every JSON-RPC error code.
//
// # Where a new rule goes
//
// A rule about what a frame means goes in the stage that owns the state it
// reads: a new sidecar method in Commands, a new recorded field in the
// record, a new way to wait in the lifeline. A new stage is a type with
// Claims and Intercept, built from the small interface it needs, and added
// to buildChain in cmd/acp-sidecar. It must not block the relay: slow work
// returns proxy.Hold or proxy.Defer and runs in Later, on a goroutine the
// relay owns, which gives each request it took exactly one answer.
package intercept
