// Package intercept holds everything ACP-aware that happens to a frame in
// flight: observing, rewriting, answering or holding it. The proxy calls it
// through proxy.Hook; each Interceptor claims the few frames it cares about by
// their peeked envelope and lets the rest pass untouched.
//
// Holding and answering are verdicts (DESIGN.md "Data flow" 2). A client
// request that must wait (the agent restarts, or its session is stale or
// being rebuilt) gets proxy.Hold: the relay keeps its place and runs the
// verdict's Later, which waits in the room (wait.go), in arrival order, and
// then sends the request on through the rest of the chain. A request the
// sidecar answers after slow work (a slash command, a `_sidecar/*` method)
// gets proxy.Defer. The relay holds each request the chain took to one
// answer. A request the dead agent never read comes back through
// proxy.UnsentHook and waits the same way.
//
// A rebuild (reset, rollback, restore-original, the crash ladder, a reopen,
// a fork, a switch) runs under rebuilding (rebuild.go): an attempt the agent
// died under is never settled, and runs again from the same capture once a
// restarted agent is up.
package intercept
