// Package state is the durable record of every client-facing session: identity,
// config layers, turns, lineage and the id mapping; and of what each named agent
// said about itself when it was first started. It speaks its own types, not ACP
// wire types, and imports no other package of this module.
//
// The stores meet one contract (Store): NewMemory for tests and
// `--store memory`; badger on disk; Open, the one a sidecar of one host
// uses, which shares one badger directory between the sidecar processes of
// several editor windows (one owns badger and serves the rest over a unix
// socket); and OpenPostgres, the fleet's, on PostgreSQL, where each session
// has a lease that keeps it to one writer (Leaser, lease.go). Open and
// OpenPostgres apply writes in the background, from one queue, and never
// make a caller fail because the store is busy or gone. Flush is the "write
// and wait" for the points where DESIGN.md "Processes" needs a write to land
// before a response is forwarded.
//
// The PostgreSQL schema is in pgschema/, one versioned file per change,
// applied at start under an advisory lock (pgmigrate.go).
package state
