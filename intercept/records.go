package intercept

import (
	"context"
	"errors"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// records reach a session's record where it lies: in the record's memory
// (record.Recorder.Session), or only in the store, for a session this
// process does not hold. They bring one back into memory (revive), read
// and write one wherever it is, and keep what a deleted session's forks
// inherited from it. Every method runs on the recorder's goroutine
// (record.Recorder.Do), which owns the sessions in memory.
type records struct {
	store state.Store
	rec   *record.Recorder
	led   *ledger.Ledger
	rb    *rebuild.Rebuilder // the lineage's look-up (Rebuilder.Lookup)
}

// revive loads a session the recorder does not hold from the store and
// marks it stale; it reports whether the session was already held.
func (r *records) revive(ctx context.Context, sid string) (held bool, err error) {
	if r.rec.Session(sid) != nil {
		return true, nil
	}
	old, err := r.store.Session(ctx, sid)
	if err != nil {
		return false, err
	}
	s := &record.Session{Rec: *old, Started: true}
	if turns, err := r.store.Turns(ctx, sid); err == nil {
		s.Turns = turns
	}
	r.rec.SetSession(sid, s)
	// No turn runs on a session brought back from the store: one that reads
	// running died with the process that ran it (a crash, or another host
	// of a fleet), and is marked so.
	for i := range s.Turns {
		if t := &s.Turns[i]; t.Status == state.TurnRunning {
			t.Status = state.TurnInterrupted
			r.rec.PutTurn(ctx, s, t)
		}
	}
	r.led.Update(func(f *ledger.Flight) {
		f.Remap(sid, old.NativeID, f.Life())
		f.Sessions.MarkStale(sid)
	})
	return false, nil
}

// keepInheritance copies what each fork of parent inherited from it into
// the fork's own record, before parent is deleted. The forks of such a
// fork count the copied turns in their fork point.
func (r *records) keepInheritance(ctx context.Context, parent string) error {
	sums, err := r.store.Sessions(ctx)
	if err != nil {
		return err
	}
	lineage := map[string]*state.Session{} // every session with a lineage, by id
	for _, sum := range sums {
		if sum.ID == parent {
			continue
		}
		rec := r.recordOf(ctx, sum.ID)
		if rec != nil && rec.Lineage != nil {
			lineage[sum.ID] = rec
		}
	}
	for id, rec := range lineage {
		if rec.Lineage.ParentID != parent {
			continue
		}
		inherited := replay.Inherited(rec, r.rb.Lookup(ctx))
		if len(inherited) == 0 {
			continue
		}
		if err := r.adoptTurns(ctx, id, rec, inherited); err != nil {
			return err
		}
		for gid, g := range lineage {
			if g.Lineage.ParentID == id {
				g.Lineage.ForkTurn += len(inherited)
				if err := r.putRecord(ctx, gid, g); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// adoptTurns puts inherited ahead of the fork id's own turns, in the store
// and in memory.
func (r *records) adoptTurns(ctx context.Context, id string, rec *state.Session, inherited []state.Turn) error {
	var own []state.Turn
	if s := r.rec.Session(id); s != nil {
		own = r.rec.FullTurns(ctx, s)
	} else {
		var err error
		if own, err = r.store.Turns(ctx, id); err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
	}
	k := len(inherited)
	turns := make([]state.Turn, 0, k+len(own))
	for i, t := range inherited {
		t.Index = i + 1
		turns = append(turns, t)
	}
	for _, t := range own {
		t.Index += k
		turns = append(turns, t)
	}
	if rec.ContextFrom > 0 {
		rec.ContextFrom += k
	}
	if c := rec.Compaction; c != nil {
		c.Turn += k // the turn it ran in moved with the fork's own turns
	}
	for i := range turns {
		if err := r.store.PutTurn(ctx, id, &turns[i]); err != nil {
			return err
		}
	}
	if s := r.rec.Session(id); s != nil {
		s.MoveTurns(turns, k)
	}
	return r.putRecord(ctx, id, rec)
}

// recordOf is a session's record: the one this process holds, else the
// store's; nil when neither has it.
func (r *records) recordOf(ctx context.Context, id string) *state.Session {
	if s := r.rec.Session(id); s != nil {
		return &s.Rec
	}
	rec, err := r.store.Session(ctx, id)
	if err != nil {
		return nil
	}
	return rec
}

// putRecord writes a record recordOf returned: through the session this
// process holds, else straight to the store.
func (r *records) putRecord(ctx context.Context, id string, rec *state.Session) error {
	if s := r.rec.Session(id); s != nil {
		r.rec.PutSession(ctx, s) // rec is &s.Rec
		return nil
	}
	return r.store.PutSession(ctx, rec)
}
