// Package rebuild is the one way the sidecar replaces a session's native
// session or restores its config: after a reset, a rewind, a crash, a
// client's load or resume, a fork, a switch of agent, the agent's own
// open, and the start-up --set.
//
// Each kind is a Plan (plan.go), a small value whose Shape says how it
// stands to its session (Busy, Shared, Unmarked) and to the agent's death
// (Again, AgainOwing, Once), and whose steps say, in the order Run takes
// them, what it does: capture what it needs of the session, get the native
// session (fresh, the resume/load/new climb, a fork, or keep the one it
// has), the config to put on it (live, original, or what is owed), settle
// the outcome in the record, and what follows. plans.go has the rebuilds a
// command, a crash or a move starts (Reset, Rollback, RestoreOriginal,
// Recover, Reopen, Fork, Adopt); held.go the ones that run under a
// response the record holds (the restore after the client's open, the
// answer to an open the agent failed, the start-up settings), which the
// record starts through FollowUps. Rebuilder.Run carries out every plan
// the same way (RunHeld on a goroutine of the record's): it marks the
// session busy, so its requests wait (begin), tries the plan on the agent
// through the engine (engine.go, restore.go: model, then mode, then the
// other options in id order, each checked against the fresh catalog),
// settles the outcome on the record's goroutine, and ends the mark. It is
// the only attempt loop: when the agent dies under an attempt nothing of
// it is settled, and Run tries again on the restarted agent, which is why
// a kill at any point converges.
//
// It works on the owners (the record, the ledger, the agent's life) and
// never on a stage; the stages and the session operations above it call
// Run with a plan. Watch is how a rebuild and a held request wait for the
// agent.
package rebuild
