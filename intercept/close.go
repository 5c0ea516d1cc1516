package intercept

import (
	"github.com/acp-sidecar/acp-sidecar/state"
)

// session/close ends a session on the agent's side (DESIGN.md "A session's
// whole life"). The record says closed, and the session leaves the
// sessions this process keeps live: a crash marks none of them stale, so
// nothing rebuilds, resumes or loads a closed session behind the client's
// back. The client's own load or resume reopens it from the record, with
// its config restored, as any session this process does not hold.

// reopened clears a closed mark: the client opened the session again.
func reopened(rec *state.Session) { rec.Closed = nil }
