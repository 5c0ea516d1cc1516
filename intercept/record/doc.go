// Package record keeps the record of every session that passes one agent:
// the config layers (baseline, original, live, overrides), every turn with
// its prompt, answer, tool calls and status, and the native sessions behind
// each client session. It writes them to the store.
//
// It is one of the owners intercept/'s stages share, and imports none of
// them. The chain offers it frames (intercept's recordStage): Intercept
// copies what it claims onto a bounded queue, off the relay's path, and one
// goroutine decodes and writes it, so the sessions' working copies
// (Session) live on that goroutine alone. Anyone else reaches a session
// there: Do and OnSession wait for a function to run on it, Queue runs one
// in relay order without waiting, and Settle runs one for a held response
// and lets the response go whatever befalls it. Message chunks skip the
// queue: their text is collected on the relay's goroutine (chunks.go) and
// taken there too, as the turn's end goes by (Text.TakeTurnText), so the
// text that follows it, such as the next queued prompt's, is not this
// turn's; the exception is a chunk that is the transcript form of a
// notice, which is queued to the turn's notices (notices.go). A session
// has one running turn, the one the agent's output belongs to; prompts
// sent while it runs wait behind it (Session.queued) and each ends by its
// own answer.
// Notices, the agent's title and its compactions (compaction.go) are kept
// apart from the conversation: no handoff carries a notice, and a
// compaction's summary stands in for the turns before it.
//
// The record holds a response only where DESIGN.md "Processes" asks the
// write to land first: a config change accepted, a turn ended, a session
// opened. What follows a response it held (the start-up settings, the
// restore after the agent's own open, a model change asked the other way,
// a close or delete the agent made) is the rebuilds' and the session
// operations' job above it: the record calls it through Then.
package record
