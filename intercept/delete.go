package intercept

// session/delete forgets a session (DESIGN.md "A session's whole life"):
// its config layers, turns, handoff text, native history and lineage leave
// the store, and by the time the client has its answer, the disk
// (state.Store.DeleteSession). The delete goes on to the agent when the
// agent can delete, and the record is forgotten once the agent has done
// it; else the sidecar answers it, once the record is gone. Deleting a
// session the sidecar never knew succeeds, as the protocol asks.
//
// A fork keeps what it inherited from a deleted parent: the inherited
// turns are copied into the fork's own record, ahead of its own turns, so
// its conversation, its handoff and `show` read as before. Its lineage
// still names the parent, which no longer resolves.
