package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// The reads of a Shared store: the backend's answer with this process's
// queued writes replayed on top, so that a process reads what it wrote
// whether or not it has landed, and whichever backend is there.

// reader returns the backend to read from, waiting up to ConnectTimeout for
// one, and a snapshot of the queued writes of session id (all sessions when id
// is ""). The snapshot is taken first: a write that lands meanwhile is then in
// both, and replaying it twice gives the same result.
func (s *Shared) reader(ctx context.Context, id string) (Store, map[string][]*op, error) {
	pend := s.writes.pending(id)
	b, err := s.link.wait(ctx)
	return b, pend, err
}

func (s *Shared) Session(ctx context.Context, id string) (*Session, error) {
	b, pend, err := s.reader(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	return s.mergedSession(ctx, b, id, pend[id])
}

// mergedSession is the backend's record of id (b may be nil) with the queued
// writes ops replayed on top.
func (s *Shared) mergedSession(ctx context.Context, b Store, id string, ops []*op) (*Session, error) {
	var got *Session
	err := ErrUnavailable
	if b != nil {
		_, err = s.link.readOn(ctx, b, func(b Store) (err error) {
			got, err = b.Session(ctx, id)
			return err
		})
	}
	for _, o := range ops {
		switch {
		case o.session != nil:
			prev := got
			got = clone(o.session)
			if got.Original == nil && prev != nil {
				got.Original = prev.Original
			}
			err = nil
		case o.del != nil:
			got, err = nil, fmt.Errorf("get session %s: %w", id, errGone)
		}
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	if got.Original == nil {
		got.Original = clone(s.writes.original(id))
	}
	return got, nil
}

func (s *Shared) Turns(ctx context.Context, sessionID string) ([]Turn, error) {
	b, pend, err := s.reader(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list turns %s: %w", sessionID, err)
	}
	return s.mergedTurns(ctx, b, sessionID, pend[sessionID])
}

// mergedTurns is the backend's turns of id (b may be nil) with the queued
// writes ops replayed on top.
func (s *Shared) mergedTurns(ctx context.Context, b Store, id string, ops []*op) ([]Turn, error) {
	var got []Turn
	err := ErrUnavailable
	if b != nil {
		_, err = s.link.readOn(ctx, b, func(b Store) (err error) {
			got, err = b.Turns(ctx, id)
			return err
		})
		if err != nil && !errors.Is(err, ErrUnavailable) {
			return nil, err
		}
	}
	if err != nil && len(ops) == 0 {
		return nil, fmt.Errorf("list turns %s: %w", id, err)
	}
	if deletedBy(ops) {
		return nil, fmt.Errorf("list turns %s: %w", id, errGone)
	}
	return replayTurns(got, ops), nil
}

// deletedBy says whether ops, one session's queued writes, delete it.
func deletedBy(ops []*op) bool {
	return slices.ContainsFunc(ops, func(o *op) bool { return o.del != nil })
}

// replayTurns applies queued turn writes and rollbacks to the backend's turns.
func replayTurns(base []Turn, ops []*op) []Turn {
	if len(ops) == 0 {
		return base
	}
	m := map[int]Turn{}
	for _, t := range base {
		m[t.Index] = t
	}
	for _, o := range ops {
		switch {
		case o.del != nil:
			clear(m)
		case o.turn != nil:
			m[o.turn.Index] = *clone(o.turn)
		case o.rollback():
			for i, t := range m {
				if i > o.keep {
					t.Status = TurnRolledBack
					m[i] = t
				}
			}
		}
	}
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b Turn) int { return a.Index - b.Index })
	return out
}

func (s *Shared) Sessions(ctx context.Context) ([]Summary, error) {
	b, pend, err := s.reader(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var got []Summary
	err = ErrUnavailable
	if b != nil {
		b, err = s.link.readOn(ctx, b, func(b Store) (err error) {
			got, err = b.Sessions(ctx)
			return err
		})
		if err != nil && !errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		if err != nil {
			b = nil
		}
	}
	if err != nil && len(pend) == 0 {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	// Sessions with queued writes are summarised afresh from the merged view.
	byID := map[string]int{}
	for i, sum := range got {
		byID[sum.ID] = i
	}
	var drop []int
	for id, ops := range pend {
		if deletedBy(ops) {
			if i, ok := byID[id]; ok {
				drop = append(drop, i)
			}
			continue
		}
		sess, err := s.mergedSession(ctx, b, id, ops)
		if err != nil {
			continue // turns only, no record yet: not listed
		}
		turns, _ := s.mergedTurns(ctx, b, id, ops)
		sum := Summary{ID: id, Agent: sess.Agent, AgentName: sess.AgentName, Cwd: sess.Cwd, Title: sess.Title, LastActivity: sess.Updated, Live: sess.Closed == nil, Closed: sess.Closed != nil}
		i, ok := byID[id]
		if ok {
			sum.LastActivity = later(sum.LastActivity, got[i].LastActivity)
		}
		if sum.Live {
			sum.Holder = s.src.holder() // its queued writes are this process's
		}
		for _, t := range turns {
			if t.Status != TurnRolledBack {
				sum.Turns++
			}
			sum.LastActivity = later(sum.LastActivity, t.activity())
		}
		if ok {
			got[i] = sum
		} else {
			got = append(got, sum)
		}
	}
	slices.Sort(drop)
	for _, i := range slices.Backward(drop) {
		got = slices.Delete(got, i, i+1)
	}
	sortSummaries(got)
	return got, nil
}

func (s *Shared) ClientID(ctx context.Context, nativeID string) (string, error) {
	b, pend, err := s.reader(ctx, "")
	if err != nil {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, err)
	}
	forgotten := false // by a queued delete
	for sid, l := range pend {
		mapped := false
		for _, o := range l {
			switch {
			case o.del != nil:
				forgotten = forgotten || mapped
				mapped = false
			case o.session != nil && slices.Contains(nativeIDs(o.session), nativeID):
				mapped = true
			}
		}
		if mapped {
			return sid, nil
		}
	}
	if forgotten {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, ErrNotFound)
	}
	if b == nil {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, ErrUnavailable)
	}
	var id string
	_, err = s.link.readOn(ctx, b, func(b Store) (err error) {
		id, err = b.ClientID(ctx, nativeID)
		return err
	})
	if err == nil && deletedBy(pend[id]) {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, ErrNotFound)
	}
	return id, err
}

// Agent reads a queued PutAgent of name first, without asking the backend: a
// put replaces the whole record, so nothing stored can be newer, just as a
// queued PutSession wins over the stored session in Session. With none queued
// it reads the backend, waiting for one like the other reads, and fails with
// ErrUnavailable when none comes.
func (s *Shared) Agent(ctx context.Context, name string) (*AgentInfo, error) {
	if a := s.writes.agent(name); a != nil {
		return a, nil
	}
	b, err := s.link.wait(ctx)
	if err == nil && b == nil {
		err = ErrUnavailable
	}
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, err)
	}
	var a *AgentInfo
	_, err = s.link.readOn(ctx, b, func(b Store) (err error) {
		a, err = b.Agent(ctx, name)
		return err
	})
	if errors.Is(err, ErrUnavailable) {
		return nil, fmt.Errorf("get agent %s: %w", name, err)
	}
	return a, err
}

// Close lands the queued writes (for up to CloseTimeout), then lets go of the
// backend: an owner stops serving and closes badger, and a client of it takes
// over. Writes still queued at the deadline are lost and the error says how
