package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
)

// queue is a Shared store's write queue: the writes this process made that
// have not landed yet, oldest first, and what they tell of its sessions
// meanwhile (the originals it put, the sessions it writes, those it
// deleted). One mutex guards all of it because a write is checked and
// queued in one step, the same step in which a delete or Close changes what
// is refused: a put that passed the check can never be queued behind the
// delete that came after it, nor after the worker has drained the queue for
// Close.
type queue struct {
	gate gate          // the source's say on each session's writes
	wake chan struct{} // capacity 1: the worker has something to look at

	mu        sync.Mutex
	ops       []*op            // queued writes, oldest first
	pend      map[string][]*op // the same, by session, for reads (PutAgent aside)
	agents    map[string]*op   // the newest queued PutAgent of each name, for reads
	enq, done uint64           // sequence of the last queued and last applied write
	progress  chan struct{}    // closed (and replaced) when a write lands
	errs      []error          // write errors since the last flush
	originals map[string]*Config
	claims    map[string]bool // sessions this process wrote: live
	deleted   map[string]bool // sessions deleted (or being deleted) as far as this process knows
	closing   bool            // Close was called: nothing more is queued
}

// A gate is what the queue asks of the store's source about one session's
// writes. Both methods run under the queue's mutex, so that they see the
// writes in the order they are queued and land, and must not block.
type gate interface {
	// refuse is why a write for session id must not even be queued (nil:
	// it may be).
	refuse(id string) error
	// landed is told of each write of session sid the backend took or
	// refused (err), and whether none of sid's is queued any more.
	landed(sid string, err error, drained bool)
}

func newQueue(g gate) *queue {
	return &queue{
		gate: g, wake: make(chan struct{}, 1),
		pend: map[string][]*op{}, agents: map[string]*op{}, progress: make(chan struct{}),
		originals: map[string]*Config{}, claims: map[string]bool{}, deleted: map[string]bool{},
	}
}

// op is one queued write. Its fields are private copies, never changed, but
// for del's bookkeeping, which only the worker touches.
type op struct {
	seq     uint64
	sid     string     // "" for PutAgent
	session *Session   // PutSession
	turn    *Turn      // PutTurn
	agent   *AgentInfo // PutAgent
	del     *deletes   // DeleteSession
	keep    int        // RollBack when none of the above is set
}

// deletes is a queued DeleteSession's answer channel and retry mark.
type deletes struct {
	done chan error // capacity 1: the outcome, for DeleteSession
	// resent is set once an attempt failed on a broken connection: the
	// owner may have deleted before it broke, and then the next attempt
	// finds the session gone.
	resent bool
}

func (o *op) rollback() bool {
	return o.session == nil && o.turn == nil && o.agent == nil && o.del == nil
}

// subject names what the write is about, for the log.
func (o *op) subject() slog.Attr {
	if o.agent != nil {
		return slog.String("agent", o.agent.Name)
	}
	return slog.String("session", o.sid)
}

// apply lands the write on b. A refused original (this process did not know
// the stored one when it queued the put) must not cost the rest of the
// record, so the put is repeated without it and the refusal is still
// reported.
func (o *op) apply(ctx context.Context, b Store) error {
	switch {
	case o.session != nil:
		err := b.PutSession(ctx, o.session)
		if errors.Is(err, ErrOriginalExists) {
			rest := *o.session
			rest.Original = nil
			if err2 := b.PutSession(ctx, &rest); err2 != nil {
				return err2
			}
		}
		return err
	case o.turn != nil:
		return b.PutTurn(ctx, o.sid, o.turn)
	case o.agent != nil:
		return b.PutAgent(ctx, o.agent)
	case o.del != nil:
		err := b.DeleteSession(ctx, o.sid)
		switch {
		case errors.Is(err, errConn):
			o.del.resent = true
		case o.del.resent && errors.Is(err, ErrDeleted):
			err = nil // the attempt that broke had deleted it
		}
		return err
	default:
		return b.RollBack(ctx, o.sid, o.keep)
	}
}

var errClosed = errors.New("store closed")

// kick wakes the worker.
func (q *queue) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// add queues o, or says why not: errClosed, ErrDeleted, or the gate's
// refusal (a fleet's store: another sidecar took the session's lease). A
// put of a session claims it and remembers its first original; a delete
// is never refused but by Close, and from then on this process refuses the
// session's writes and reads it as gone.
func (q *queue) add(o *op) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return errClosed
	}
	switch {
	case o.agent != nil:
	case o.del != nil:
		q.deleted[o.sid] = true
		delete(q.originals, o.sid)
		delete(q.claims, o.sid)
	default:
		if q.deleted[o.sid] {
			return ErrDeleted
		}
		if err := q.gate.refuse(o.sid); err != nil {
			return err
		}
		if o.session != nil {
			if o.session.Original != nil && q.originals[o.sid] == nil {
				q.originals[o.sid] = o.session.Original
			}
			q.claims[o.sid] = true
		}
	}
	q.enq++
	o.seq = q.enq
	q.ops = append(q.ops, o)
	if o.agent != nil {
		q.agents[o.agent.Name] = o
	} else {
		q.pend[o.sid] = append(q.pend[o.sid], o)
	}
	q.kick()
	return nil
}

// head is the oldest queued write (nil: none), how many are queued, and
// whether Close was called: the worker's view, taken in one step.
func (q *queue) head() (o *op, n int, closing bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ops) > 0 {
		o = q.ops[0]
	}
	return o, len(q.ops), q.closing
}

// landed takes o, the head, off the queue: the backend took it, or refused
// it with err, which is then DeleteSession's to report for a delete and
// flush's for the others. A write refused because another process deleted
// the session makes this one refuse the session's next write at once.
func (q *queue) landed(o *op, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ops[0] = nil
	q.ops = q.ops[1:]
	if o.agent != nil {
		// A newer put of the same name stays: it is still the one to read.
		if q.agents[o.agent.Name] == o {
			delete(q.agents, o.agent.Name)
		}
	} else if l := q.pend[o.sid]; len(l) > 0 && l[0] == o {
		if q.pend[o.sid] = l[1:]; len(l) == 1 {
			delete(q.pend, o.sid)
		}
	}
	if o.agent == nil {
		q.gate.landed(o.sid, err, len(q.pend[o.sid]) == 0)
	}
	q.done = o.seq
	switch {
	case o.del != nil:
		// The outcome is DeleteSession's to report, not Flush's.
		if err != nil && !errors.Is(err, ErrDeleted) {
			delete(q.deleted, o.sid)
		}
		o.del.done <- err
	case errors.Is(err, ErrDeleted):
		q.deleted[o.sid] = true // by another process: refuse the next write at once
		q.errs = append(q.errs, err)
	case err != nil:
		q.errs = append(q.errs, err)
	}
	close(q.progress)
	q.progress = make(chan struct{})
}

// flush waits until every write queued before the call has landed, and
// returns the write errors since the last flush. When ctx ends first it
// returns ctx's error, and keeps the write errors for the next flush.
func (q *queue) flush(ctx context.Context) (errs []error, err error) {
	q.mu.Lock()
	target := q.enq
	for q.done < target {
		ch := q.progress
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		q.mu.Lock()
	}
	errs = q.errs
	q.errs = nil
	q.mu.Unlock()
	return errs, nil
}

// pending is a copy of the queued writes of session id (of every session
// when id is ""), by session, for a read to replay over the backend's
// answer.
func (q *queue) pending(id string) map[string][]*op {
	q.mu.Lock()
	defer q.mu.Unlock()
	pend := map[string][]*op{}
	for sid, l := range q.pend {
		if id == "" || sid == id {
			pend[sid] = slices.Clone(l)
		}
	}
	return pend
}

// waiting is how many writes of session id are queued.
func (q *queue) waiting(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pend[id])
}

// queued is a copy of every queued write, oldest first.
func (q *queue) queued() []*op {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.ops)
}

// agent is a copy of the newest queued PutAgent of name, nil if none is
// queued.
func (q *queue) agent(name string) *AgentInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	if o := q.agents[name]; o != nil {
		return clone(o.agent)
	}
	return nil
}

// claimed lists the sessions this process writes, sorted: a new backend is
// told of them, so the owner counts them live.
func (q *queue) claimed() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Sorted(maps.Keys(q.claims))
}

// original is the original of session id this process knows of, nil if
// none. It is shared, not copied: a remembered original is never changed.
func (q *queue) original(id string) *Config {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.originals[id]
}

// remember keeps c, read from the backend, as session id's original
// unless one is known already, and returns the one known now.
func (q *queue) remember(id string, c *Config) *Config {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.originals[id] == nil {
		q.originals[id] = c
	}
	return q.originals[id]
}

// close refuses every write from now on and wakes the worker to drain what
// is queued. It reports false when Close was called before.
func (q *queue) close() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return false
	}
	q.closing = true
	q.kick()
	return true
}

// abandon answers the deletes still queued once the worker has stopped,
// and returns how many writes were never stored.
func (q *queue) abandon() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, o := range q.ops {
		if o.del != nil {
			o.del.done <- fmt.Errorf("delete session %s: %w: no backend took it before close", o.sid, errClosed)
		}
	}
	return len(q.ops)
}
