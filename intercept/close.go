package intercept

import (
	"context"
	"fmt"
	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// session/close ends a session on the agent's side (DESIGN.md "A session's
// whole life"). The record says closed, and the session leaves the
// sessions this process keeps live: a crash marks none of them stale, so
// nothing rebuilds, resumes or loads a closed session behind the client's
// back. The client's own load or resume reopens it from the record, with
// its config restored, as any session this process does not hold.

// closeHere closes a session the agent cannot close, for the lifeline.
func (r *Recorder) closeHere(ctx context.Context, sid string) error {
	if err := r.do(ctx, func(ctx context.Context) { r.markClosed(ctx, sid) }); err != nil {
		return fmt.Errorf("close %s: %w", sid, err)
	}
	return nil
}

// markClosed records that sid is closed. A session the record does not
// know is not the sidecar's: nothing to mark.
func (r *Recorder) markClosed(ctx context.Context, sid string) {
	s := r.sessions[sid]
	if s == nil {
		old, err := r.cfg.Store.Session(ctx, sid)
		if err != nil {
			return
		}
		s = &session{rec: *old, started: true}
	}
	now := r.cfg.Now()
	s.rec.Closed = &now
	r.putSession(ctx, s)
	r.flush(ctx)
	delete(r.sessions, sid)
	r.led.Update(func(f *ledger.Flight) { f.Forget(sid) })
	r.log.Info("session closed", "session", sid)
}

// reopened clears a closed mark: the client opened the session again.
func reopened(rec *state.Session) { rec.Closed = nil }
