// Package replay makes the pure decisions behind a rebuild: the restore plan for
// a captured config against a fresh catalog, and the kept-turn handoff text. It
// does no I/O; intercept/ executes its plans.
package replay
