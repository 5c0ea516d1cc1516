package intercept

import (
	"context"
	"errors"
	"fmt"
	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"

	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

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

// deleteHere forgets a session for an agent that cannot delete, for the
// lifeline.
func (r *Recorder) deleteHere(ctx context.Context, sid string) error {
	var err error
	if derr := r.do(ctx, func(ctx context.Context) { err = r.forget(ctx, sid) }); derr != nil {
		return fmt.Errorf("delete %s: %w", sid, derr)
	}
	return err
}

// forget removes sid from the store and from this process. It runs on the
// recorder's goroutine.
func (r *Recorder) forget(ctx context.Context, sid string) error {
	if err := r.keepInheritance(ctx, sid); err != nil {
		return fmt.Errorf("delete %s: keep what its forks inherited: %w", sid, err)
	}
	if err := r.cfg.Store.DeleteSession(ctx, sid); err != nil && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("delete %s: %w", sid, err)
	}
	if s := r.sessions[sid]; s != nil {
		r.takeAnswer(s.rec.NativeID) // a running turn's text goes with it
	}
	delete(r.sessions, sid)
	r.led.Update(func(f *ledger.Flight) { f.Forget(sid) })
	r.log.Info("session deleted", "session", sid)
	return nil
}

// keepInheritance copies what each fork of parent inherited from it into
// the fork's own record, before parent is deleted. The forks of such a
// fork count the copied turns in their fork point.
func (r *Recorder) keepInheritance(ctx context.Context, parent string) error {
	sums, err := r.cfg.Store.Sessions(ctx)
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
		inherited := replay.Inherited(rec, r.lookup(ctx))
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
func (r *Recorder) adoptTurns(ctx context.Context, id string, rec *state.Session, inherited []state.Turn) error {
	var own []state.Turn
	if s := r.sessions[id]; s != nil {
		own = r.fullTurns(ctx, s)
	} else {
		var err error
		if own, err = r.cfg.Store.Turns(ctx, id); err != nil && !errors.Is(err, state.ErrNotFound) {
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
	for i := range turns {
		if err := r.cfg.Store.PutTurn(ctx, id, &turns[i]); err != nil {
			return err
		}
	}
	if s := r.sessions[id]; s != nil {
		running := -1
		if s.turn != nil {
			running = s.turn.Index + k
		}
		s.turns, s.textFrom, s.turn = turns, 0, nil
		if running > 0 {
			s.turn = &s.turns[running-1]
		}
	}
	return r.putRecord(ctx, id, rec)
}

// recordOf is a session's record: the one this process holds, else the
// store's; nil when neither has it.
func (r *Recorder) recordOf(ctx context.Context, id string) *state.Session {
	if s := r.sessions[id]; s != nil {
		return &s.rec
	}
	rec, err := r.cfg.Store.Session(ctx, id)
	if err != nil {
		return nil
	}
	return rec
}

// putRecord writes a record recordOf returned: through the session this
// process holds, else straight to the store.
func (r *Recorder) putRecord(ctx context.Context, id string, rec *state.Session) error {
	if s := r.sessions[id]; s != nil {
		r.putSession(ctx, s) // rec is &s.rec
		return nil
	}
	return r.cfg.Store.PutSession(ctx, rec)
}

// lookup finds a fork's parent for its inheritance: in this process, else
// in the store (the parent may belong to an earlier run).
func (r *Recorder) lookup(ctx context.Context) replay.Lookup {
	return func(id string) (*state.Session, []state.Turn, bool) {
		if p := r.sessions[id]; p != nil {
			return &p.rec, r.fullTurns(ctx, p), true
		}
		rec, err := r.cfg.Store.Session(ctx, id)
		if err != nil {
			return nil, nil, false
		}
		turns, err := r.cfg.Store.Turns(ctx, id)
		if err != nil {
			return nil, nil, false
		}
		return rec, turns, true
	}
}
