// Package life is the one owner of the agent's life as the sidecar sees it
// (DESIGN.md "The house"): its phase (up, restarting, dead), its
// generation (one more at each exit), what it said it can do, and the
// initialize and authenticate params a restarted agent must be given
// again. The supervisor moves it from phase to phase; the stages and the
// rebuilds read it, and wait on it (Watch) for the agent to come back.
//
// It knows no frame and no session: what an exit does to the requests in
// flight is the ledger's, and to the running turns the record's.
package life
