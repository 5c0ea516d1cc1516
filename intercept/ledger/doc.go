// Package ledger is the one owner of what is in flight between the client
// and the agent (DESIGN.md "The house"): every client request the chain has
// taken and not yet seen answered, the requests the agent made of the
// client, the client requests that wait for their session, and each
// session's flight state (its native id, whether a rebuild runs on it or it
// died with the agent, whether prompts are refused, the config a failed
// restore still owes, the handoff its next prompt carries).
//
// Every change goes through Ledger.Update, which runs a function on the
// Flight under the one lock, the way golang.org/x/tools' jsonrpc2_v2 keeps
// its in-flight state behind one update function. The Flight keeps its
// state by concern, each part the owner of its maps and its counters:
// Requests (the client's requests and the one answer rule, the agent's
// asks), Sessions (each session's flight state and turns), Natives (per
// native session: command lists, hushes, creations) and Waiters. Their
// methods are the only words for a change; after each Update the ledger
// copies the parts' counters into the atomics that the relay's goroutines
// read without the lock (Mapped, Splicing, Waiting, Running). What spans
// parts is the Flight's own: a death of the agent is one Update, in which
// what it had in flight is taken out and answered and every session is
// marked to be rebuilt, all at once, with nothing left half-cleared for
// another goroutine to see.
//
// Reads that must not wait for the lock on every frame are the atomic
// counters; other reads take the lock for as long as a map lookup.
//
// The ledger knows ids, methods and states, not what a frame means: it
// imports no stage, and what a hush keeps back or when a request must wait
// is decided by the stages that ask it.
package ledger
