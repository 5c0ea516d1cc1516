// Package fakeagent is a real ACP agent on stdio, built on acp-go-sdk's
// AgentSideConnection, that the sidecar's tests run in place of claude,
// codex, gemini or opencode. `acp-sidecar fakeagent [flags]` calls Main.
//
// Everything it does is deterministic: session ids are PREFIX1, PREFIX2, …
// (-id-prefix, default "fake-sess-"), replies depend only on what it
// received, and nothing reads the clock. Sessions live in memory, so the
// process is the session store: after a restart session/load fails, as it
// would for an agent that lost its state. With -state FILE the agent also
// writes its sessions (id, cwd, config, history) to FILE as JSON after every
// change (a temp file renamed over it) and reads FILE at start, so a
// restarted agent with the same -state can session/load (replaying the
// history) and session/resume the sessions of its earlier life, like an
// agent that keeps them on disk; new ids continue after the highest one
// persisted.
//
// session/close (-close) answers {} and leaves the session loadable, as a
// real agent's closed session stays on disk. With -delete the agent
// advertises sessionCapabilities.delete and answers session/delete
// {sessionId} with {}: the session is forgotten, so a later load, resume,
// prompt or list treats it as unknown (-32002), and -state is rewritten
// without it; deleting an unknown or already deleted session succeeds, as
// the ACP session-delete RFD says it should. acp-go-sdk v0.13.0 has no
// session/delete, so the stdin reader answers it before the SDK sees it, and
// the initialize response is rewritten to carry the capability. Without
// -delete the SDK answers session/delete with -32601.
//
// session/list (-list) lists every session at once. With -list-lag N it
// lists a session only once the session has a finished turn and N
// session/list calls have left it out since, as claude-agent-acp 0.23.1
// lists the claude CLI's transcript files, which the CLI writes on a 100ms
// timer after answering the turn: the lag is a count of calls, so it is
// deterministic. A session with turns from -state, or a fork of one, is
// listed at once. With -load-lag too, a session/load of a session the
// listing still leaves out replays nothing, as 0.23.1 replays a
// transcript that has yet to land.
//
// # Config
//
// One underlying state per session (model, mode, effort, verbosity) is
// exposed through up to three surfaces, chosen by the profile (see
// ProfileNames and `fakeagent -h`): configOptions (ids "model", "effort",
// "mode", "verbosity", categories model, thought_level, mode and none),
// legacy `modes` and legacy `models`. Models are fast-1 (no effort when
// model-dependent), smart-2 (effort low|medium|high, default medium) and
// deep-3 (medium|high|max, default high); modes ask, code (default), plan;
// verbosity terse, normal (default), verbose. session/set_mode,
// session/set_config_option and session/set_model change the same state and
// reject unknown values with -32602 unless -accept-unknown (real agents
// accept them silently; the sidecar must validate). After set_mode come
// current_mode_update and config_option_update; after a model change that
// alters effort comes config_option_update; both are written right after
// the response, as the agents that "follow up" do. session/load and
// session/resume go back to the default config unless -load-keeps-config,
// and their results leave out `modes` and `models` under
// -reopen-drops-legacy (session/new still has them). With -resume-notes a
// resume first sends an agent_message_chunk about the model (ResumeNote),
// as codex-acp 2.6.0 warns that it resumes on another model.
//
// # Prompts
//
// Every prompt is answered by a reply line (see Reply and ParseReply),
// streamed as two agent_message_chunk updates, then stopReason end_turn. The
// last text block of the prompt may trigger a quirk (it is matched after
// trimming spaces; earlier blocks, such as a sidecar handoff, never trigger):
//
//	crash now        after the first chunk, Main returns 3 at once (also -crash-mid-turn)
//	stream N S       N more chunks of S bytes after the reply (also -chunks, -chunk-size)
//	echo:…           every text block echoed verbatim after the reply (Reply.Echo)
//	meta             writes MetaLine raw: _meta with a 20-digit integer and <>&
//	unknown update   writes UnknownUpdateLine raw: sessionUpdate "brand_new_update"
//	ext              sends a `_fake/notice` notification
//	ask permission [PATH]  tool_call, session/request_permission, then
//	                 fs/read_text_file of PATH (default CWD/fake.txt) if allowed;
//	                 outcomes in the reply's permission= and read= fields
//	background       work after the answer: a chunk, a tool call and its
//	                 permission request; in v2 then a turn the agent begins
//	                 itself, with requires_action (background.go)
//	rename TITLE     the session's title is TITLE from this turn on (-info-updates,
//	                 session/list); it is the first prompt's before any rename
//	hang             sends "fake-agent waiting for session/cancel", waits for
//	                 session/cancel (or stdin EOF), then stopReason cancelled
//	subagent         with -subagents: opens child session fake-sub-N (see
//	                 runSubagent) if the client's initialize advertised
//	                 clientCapabilities.subagents: {}; reply fields subagent=ID
//	                 and permission=…; else subagent=not-negotiated and no
//	                 subagent frame at all (the ACP v1 draft forbids them)
//
// The "subagent" prompt writes, inside the turn and before the reply line:
// on the parent a subagent_update announcing the child (title, description,
// state running) before any frame that names the child; on the child an
// agent_message_chunk, a tool_call (pending) and its tool_call_update
// (completed); session/request_permission for the child, awaited; and on the
// parent a subagent_update with state idle, stopReason end_turn. The
// subagent_update lines are written raw (acp-go-sdk v0.13.0 has no such
// update); the child count goes on in a restarted agent with the same -state.
//
// `_fake/echo` requests are answered with their params.
//
// # Today's wire habits
//
// claude-agent-acp 0.101.0 and codex-acp 2.6.0 write things older agents
// never did (../../../shared/acp/agents.md, "The packages editors install
// today"). Each is a switch, off in the older profiles, whose output stays
// byte for byte what it was:
//
//	-message-ids   every agent_message_chunk, replayed ones included, carries
//	               messageId MessageID(session, turn): one UUID-shaped id per
//	               turn (the raw "meta" line excepted)
//	-info-updates  a turn that ends with end_turn ends, before its response,
//	               with session_info_update (title: the session's first
//	               prompt, updatedAt: 2026-01-01T00:00:00Z plus one minute a
//	               turn) and usage_update (used 1000 a turn, size 200000,
//	               cost 0.25 USD a turn, cumulative); session/list reports
//	               the same updatedAt
//	-auth-notice   AuthStatusLine, an `_auth/status_update` notification with
//	               no session id, right after the initialize response
//	-strict-init   until the first initialize request, any other request is
//	               answered NotInitializedLine (-32600 "Invalid request", data
//	               "first ACP request must be initialize") and never handled,
//	               and notifications and responses are ignored, as the
//	               TypeScript SDK's protocol router does; a restarted agent
//	               that gets a client's request ahead of the sidecar's own
//	               initialize fails it
//	-queue-prompts a prompt that comes while a turn of its session runs
//	               waits, and runs once that turn has been answered (in v2
//	               it is inserted then); session/cancel answers the waiting
//	               ones cancelled (-32800 in v2), as claude-agent-acp 0.101.0
//	               does (queue.go)
//
// The profiles claude-current and codex-current preset these with what
// those agents advertise (`fakeagent -h` lists each): both have resume,
// list, close, delete and fork, and -strict-init (both serve stdio through
// the SDK's router); claude-current has loadSession, legacy modes without
// legacy models, and -queue-prompts; codex-current has legacy modes and
// models at session/new only (-reopen-drops-legacy), -subagents and model-dependent
// effort, and no loadSession, which agents.md does not report for codex-acp
// 2.6.0, so the sidecar meets an agent that can resume but not load. Neither
// ignores stdin EOF, though both real agents do; add -ignore-eof.
//
// # ACP v2
//
// With -v2 (and in the profile v2-current, claude-current plus -v2) a
// client whose initialize asks for protocolVersion 2 or more gets ACP v2
// for the connection, as claude-agent-acp 0.101.0 and codex-acp 2.6.0
// answer one (testdata/v2); one that asks for 1 gets v1, byte for byte
// what it got without -v2. acp-go-sdk speaks v1 only, so v2 is an adapter
// at the stdio edges (v2.go): it hands the SDK the v1 form of each v2
// frame and rewrites the agent's v1 frames into v2, and every flag and
// prompt quirk above works in both versions. In v2:
//
//	initialize      {protocolVersion: 2, info, capabilities: {session: {prompt,
//	                mcp, delete?, fork?}}, authMethods}; loadSession is gone, and
//	                list, resume and close are baseline, served whatever the flags say
//	session/prompt  user_message {messageId: UserMessageID(session, turn), content:
//	                the prompt}, then the answer {messageId}, then state_update
//	                running, the turn, and state_update idle with the v1 stopReason
//	                (cancelled after session/cancel; error, with the error, if the v1
//	                turn failed after the answer); no idle after a crash
//	session/resume  replayFrom {type: start} replays as session/load does, each
//	                message announced (user_message, agent_message with content [])
//	                before its chunks; without replayFrom it is v1's resume; either
//	                way state_update idle comes just before the result
//	removed         session/load, session/set_mode and session/set_model answer
//	                -32601 "\"Method not found\": METHOD"; set_config_option takes
//	                type "id" or "boolean" (else -32602); results and
//	                config_option_update name options by configId and have no modes
//	                or models; current_mode_update is not sent
//	messageId       every message chunk has one: the turn's MessageID (as if
//	                -message-ids), or one of the adapter's own outside a turn
//	commands        with -commands-in-result (and -commands), every session result
//	                lists them (availableCommands) and no available_commands_update
//	                is sent, as codex-acp 2.6.0 gives them in v2
//
// # Crashes
//
// Every crash is abrupt: Main returns its status at once and nothing more
// is written to stdout; requests not answered yet are never answered.
//
//	-crash-mid-turn  status 3 after the first reply chunk of every prompt
//	-die-after N     -die-code right after the Nth session/prompt response is written
//	-die-on M[:N]    -die-code on receiving the Nth message of method M (N default 1),
//	                 before it is handled: the client's call fails, the call
//	                 log has it. Repeatable, or comma separated
//	                 (-die-on session/new:2,session/load). Counts start at 0
//	                 in every process and count requests and notifications.
//	-die-mid-load    -die-code right after the first replayed session/update of
//	                 a session/load is written (a load that replays nothing is
//	                 answered as usual)
//	-die-once FILE   -die-on and -die-mid-load fire only if FILE does not exist,
//	                 and create it (exclusively) just before dying. A restarted
//	                 agent with the same argv, as the sidecar starts it, then
//	                 lives; of several agents sharing FILE only one dies.
//
// -die-code defaults to 1. -die-after ignores -die-once.
//
// # Bugs
//
//	-resume-lies     session/resume of a session the agent does not know
//	                 succeeds, on the fresh config, and every prompt on it
//	                 fails -32603 {details: "thread not found: ID"}
//	                 (ThreadNotFound), as codex-acp 2.6.0 does with its
//	                 thread gone
//	-answer-twice M  every request of method M (repeatable, or comma
//	                 separated) is answered twice: the agent's answer, then
//	                 at once SecondAnswerLine, an error with the same id
//
// # Wire
//
// stdout carries nothing but ACP; the SDK connection and the raw writes share
// one mutex-guarded line writer, so lines never interleave. stdin is read by
// the package's own line reader: lines up to -max-sdk-line (8 MiB) go to the
// SDK, whose reader dies on lines over 10 MB; a longer request is answered
// directly with its size and sha256 (and per-text-block sha256 for a prompt),
// a longer notification is dropped. -call-log, -stdin-log and -stdout-log
// record what crossed the pipes; ReadCallLog reads the first.
//
// At stdin EOF the agent cancels prompts in flight, waits until every request
// received is answered, and exits 0; -ignore-eof keeps it running until ctx
// ends or it is killed, like claude-agent-acp and codex-acp.
package fakeagent
