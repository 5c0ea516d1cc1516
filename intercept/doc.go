// Package intercept holds everything ACP-aware that happens to a frame in
// flight: observing, rewriting, answering or holding it. The proxy knows
// framing and ids; this package knows what the frames mean.
//
// # A frame's way through
//
// The relay reads a line, peeks its envelope (proxy.Scan) and hands it to
// the Chain, its proxy.Hook. The chain offers the frame to each stage in
// the order cmd lists them (cmd/acp-sidecar buildChain, from the owners
// Core hands out):
//
//	client ─▶ relay ─▶ Lifeline ─▶ Emulation ─▶ Commands ─▶ Record ─▶ IDs ─▶ Pickers ─▶ Tracker ─▶ agent
//	client ◀─ relay ◀─ (the same stages, for the agent's frames)  ◀─────────────────────────────── agent
//
// Each stage in turn:
//
//   - The lifeline (lifeline.go, wait.go, resume.go) gates client
//     requests on the agent's life. A request that must wait (the agent
//     restarts, its session is stale or being rebuilt) gets proxy.Hold:
//     the relay keeps its place, the request waits in the ledger's queue
//     in arrival order, a stale session is rebuilt first, and then the
//     request goes on through the stages after the lifeline (the chain
//     hands every holder the rest of itself). It refuses what can never go
//     on (a dead agent, a closed session, a lost lease), proves a resume by
//     the prompt after it, and keeps from the client what the agent says in
//     answer to the sidecar's own rebuilds (the replay of a load the
//     sidecar made). A request the dead agent never read comes back
//     through proxy.UnsentHook and waits the same way. It takes what it
//     asks of the sessions' owners as LifelineOps.
//   - The emulation (emulation.go) decides session/load, resume, list,
//     close, delete and fork: what the agent can do goes on, and the rest
//     the sidecar answers from the record (EmulationOps). What must wait
//     waits in the lifeline's room (WaitingRoom), without a rebuild of its
//     session, which it reopens its own way. A request the lifeline held
//     was decided there, and passes.
//   - Commands (commands.go) is the sidecar's own surface: slash commands,
//     `_sidecar/*` methods (answered with proxy.Defer), the capabilities it
//     adds to initialize, its command list, and the gate that keeps a
//     prompt off a session whose config could not be restored. What it
//     answers is never recorded and never reaches the agent.
//   - The record (record/, in the chain as recordStage) copies what it
//     claims onto a bounded queue; one goroutine decodes it and writes the
//     store. A response that completes a config change or a turn is held
//     until its write lands, then meets the stages after the record.
//     Message chunks skip the queue (record/chunks.go).
//   - IDs (ids.go) keeps the client's session id stable while the native
//     session behind it is replaced, and holds an agent frame for a session
//     the sidecar is still creating, until it can go on to the stages after
//     it under the client's id.
//   - Pickers (pickers.go) follows an agent's own mode change, which it
//     reports only as a config option, with current_mode_update for a
//     client that reads only the legacy pickers.
//   - Tracker (tracker.go) notes the requests that really reach the agent,
//     so a dying agent's pending requests can be answered, and takes a
//     request out of the ledger when the agent answers it.
//
// A stage's Claims looks only at the peeked envelope; most frames are
// claimed by no one and cost nothing more. Streamed chunks, the commonest
// frames by far, are offered only to the stages that say they may claim
// one (ChunkPolicy, chain.go).
//
// # Verdicts, and one answer per request
//
// A stage's verdict is Pass, Rewrite, Answer, Drop, Hold or Defer. Hold
// keeps the frame's place in its direction and decides it later, on a
// goroutine the relay owns (Verdict.Later); Defer decides it later without
// keeping a place (a slash command's rebuild runs while the client's next
// frames go on). Every client request gets exactly one answer, and every
// answer meets one gate, the ledger's Respond (Chain.WithAnswers): the
// chain notes each client request as it comes (Ledger.Take) and holds to it
// the agent's answers, a stage's answer at once, and each Later's decision
// (what a rebuild or the waiting room decides in it): a second answer is
// dropped, and a request a Later neither forwarded nor answered gets an
// error. An agent's death answers, once, what the ledger says the dead
// agent had, and so does the relay's stop for what the agent still owes
// (the tracker's part of proxy.StopHook); both take those requests out by
// the same Respond, and both end the v2 turns the agent was running
// (Flight.EndTurns). The switchboard holds its own answers and its agents'
// to one through a ledger of its own. Under proxy.Config.Strict, which
// every test runs, a second or missing answer is a panic. The relay, which
// sees only each Later's decision, holds nothing to the rule: it notes a
// decision that reaches it broken (proxy answerOnce), which under Strict is
// a panic too.
//
// The agent's death reaches the ledger in one update (Agent.End, from
// proxy.Config.OnAgentEnd), while the relay decides no client frame: a
// request decided before it either reached the dead agent (the death
// answers it) or came back unsent (it waits); one decided after it waits
// for the next agent. Agent.Gone, once the exit status is known, is one
// update too: it takes what the death left (Flight.TakeGone), which the
// ledger kept, and answers it.
//
// # Who owns what
//
//   - The ledger (ledger/) owns everything in flight: the client requests
//     taken and not yet answered, the agent's requests to the client, the
//     queue of held requests, and each session's flight state (native id,
//     busy, stale, blocked, the config owed, the handoff owed). It changes
//     only through Ledger.Update.
//   - The agent's life (life/) owns the phase, the generation, the
//     capabilities and the initialize and authenticate params. The
//     supervisor moves it through Agent (agent.go); rebuild.Watch waits
//     on it.
//   - The record (record/) owns the sessions' records and the store
//     writes, on its goroutine; everyone else reaches a session there
//     (Recorder.Do, OnSession, Settle). What follows a response it held
//     is a plan the rebuilds run under it (record.Then, implemented by
//     rebuild.FollowUps); what follows the agent's close or delete of a
//     session is the session operations' (record.Ends). core.go names
//     both where it builds the owners.
//   - The rebuilds (rebuild/) are the one way a native session is
//     replaced or its config restored: Rebuilder.Run carries out each kind
//     of rebuild, a Plan (rebuild/plans.go, held.go), and the engine talks to the
//     agent for it. Run is the only attempt loop, so a kill at any point
//     converges there.
//   - Sessions (sessions.go, ends.go) is what the sidecar does to a
//     session for the client: the slash commands' and `_sidecar/*`
//     operations (CommandOps), the emulated close, delete and fork, a
//     rebuild before a held request, and a switch's two halves for the
//     switchboard. Beside it, each with its own state: the reopens
//     (reopen.go) answer a load, resume or list from the record; the
//     leases (leases.go) are a fleet's; the records (records.go) reach a
//     session's record outside the record's memory. Core hands the
//     lifeline and the emulation what they ask of these owners
//     (Core.LifelineOps, Core.EmulationOps).
//   - The switchboard (switchboard/) puts several agents, each behind a
//     relay and a Core of its own, behind one client.
//   - wire/ is what ACP frames look like: method names, payload readers and
//     byte-span edits. proxy/codes.go names every JSON-RPC error code.
//
// The owners import no stage. A stage is built from the small interface of
// the owners it uses (Core.LifelineOps, EmulationOps, Sessions), never from
// the whole record. Core (core.go) builds the owners once, for one agent;
// buildChain builds the stages from them.
//
// # Where a new rule goes
//
// A rule about what a frame means goes in the stage that owns the state it
// reads: a new sidecar method in Commands, a new recorded field in the
// record, a new way to wait in the lifeline, a new method the sidecar does
// for an agent that cannot in the emulation. A new kind of rebuild is a
// Plan. A new stage is a type with Claims and Intercept, built from the
// small interface it needs, and added to buildChain in cmd/acp-sidecar. It
// must not block the relay: slow work returns proxy.Hold or proxy.Defer
// and runs in Later, on a goroutine the relay owns, which gives each
// request it took exactly one answer.
package intercept
