package intercept

import (
	"context"
	"errors"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// session/close ends a session on the agent's side (DESIGN.md "A session's
// whole life"). The record says closed, and the session leaves the
// sessions this process keeps live: a crash marks none of them stale, so
// nothing rebuilds, resumes or loads a closed session behind the client's
// back. The client's own load or resume reopens it from the record, with
// its config restored, as any session this process does not hold.

// CloseHere closes a session the agent cannot close, for the emulation.
func (o *Sessions) CloseHere(ctx context.Context, sid string) error {
	if err := o.rec.Do(ctx, func(ctx context.Context) { o.Closed(ctx, sid) }); err != nil {
		return fmt.Errorf("close %s: %w", sid, err)
	}
	return nil
}

// Closed records that sid is closed. A session the record does not
// know is not the sidecar's: nothing to mark.
func (o *Sessions) Closed(ctx context.Context, sid string) {
	s := o.rec.Session(sid)
	if s == nil {
		old, err := o.cfg.Store.Session(ctx, sid)
		if err != nil {
			return
		}
		s = &record.Session{Rec: *old, Started: true}
	}
	now := o.cfg.Now()
	s.Rec.Closed = &now
	o.rec.PutSession(ctx, s)
	o.rec.Flush(ctx)
	o.rec.SetSession(sid, nil)
	o.led.Update(func(f *ledger.Flight) { f.Sessions.Close(sid) })
	o.log.Info("session closed", "session", sid)
}

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

// DeleteHere forgets a session for an agent that cannot delete, for the
// emulation.
func (o *Sessions) DeleteHere(ctx context.Context, sid string) error {
	var err error
	if derr := o.rec.Do(ctx, func(ctx context.Context) { err = o.Forget(ctx, sid) }); derr != nil {
		return fmt.Errorf("delete %s: %w", sid, derr)
	}
	return err
}

// Forget removes sid from the store and from this process. It runs on the
// recorder's goroutine.
func (o *Sessions) Forget(ctx context.Context, sid string) error {
	if err := o.records.keepInheritance(ctx, sid); err != nil {
		return fmt.Errorf("delete %s: keep what its forks inherited: %w", sid, err)
	}
	if err := o.cfg.Store.DeleteSession(ctx, sid); err != nil && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("delete %s: %w", sid, err)
	}
	if s := o.rec.Session(sid); s != nil {
		o.rec.Text().TakeAnswer(s.Rec.NativeID) // a running turn's text goes with it
	}
	o.rec.SetSession(sid, nil)
	o.led.Update(func(f *ledger.Flight) { f.Sessions.Forget(sid) })
	o.log.Info("session deleted", "session", sid)
	return nil
}
