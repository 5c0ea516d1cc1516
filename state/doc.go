// Package state is the durable record of every client-facing session: identity,
// config layers, turns, lineage and the id mapping. It speaks its own types, not
// ACP wire types, and imports no other package of this module.
package state
