package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// Options tune Open. The zero value is ready to use.
type Options struct {
	// Logger gets the store's warnings and badger's log. Nil discards them: the
	// sidecar's stderr is shown to the user and its stdout is ACP's.
	Logger *slog.Logger
	// ConnectTimeout bounds how long Open, and a read that finds no backend,
	// wait for one (the directory's owner, or the store itself once the owner is
	// gone). After it, Open returns a store that records in memory and keeps
	// trying. Zero means 2 s.
	ConnectTimeout time.Duration
	// CloseTimeout bounds how long Close tries to land queued writes. Zero
	// means 5 s.
	CloseTimeout time.Duration
	// WriteTimeout bounds one attempt to land a write: past it the
	// connection counts as broken (a half-open one never answers), and the
	// write is tried again on another. Zero means 30 s.
	WriteTimeout time.Duration
}

// Shared is the store a sidecar process uses (DESIGN.md "The store"). badger
// admits one process per directory, so the first process to open the
// directory owns badger and serves the others over a unix socket; the others
// are clients of it. When the owner goes away, whichever client notices first
// opens badger and becomes the owner, and the rest reconnect to it.
//
// Writes never wait for any of this. They go on an in-memory queue and return;
// one goroutine applies them in order to whichever backend is there, retrying
// through an owner change, so a write is never lost to a busy or vanished
// store while this process lives. Reads see this process's queued writes on top
// of what the backend returns. Flush waits for the queue to land.
//
// A delete goes on the same queue, behind the writes before it, and
// DeleteSession waits for it to land.
type Shared struct {
	dir  string // the state directory, or the fleet's database, for messages
	src  backendSource
	log  *slog.Logger
	opts Options

	ctx    context.Context // ends when Close gives up on the queue
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: the worker has something to look at
	wg     sync.WaitGroup

	mu        sync.Mutex
	queue     []*op            // queued writes, oldest first
	pend      map[string][]*op // the same, by session, for reads (PutAgent aside)
	agents    map[string]*op   // the newest queued PutAgent of each name, for reads
	enq, done uint64           // sequence of the last queued and last applied write
	progress  chan struct{}    // closed (and replaced) when done or backend changes
	errs      []error          // write errors since the last Flush
	originals map[string]*Config
	claims    map[string]bool // sessions this process wrote: live
	deleted   map[string]bool // sessions deleted (or being deleted) as far as this process knows
	backend   Store           // nil while there is none
	owner     bool
	closing   bool
	connWarn  string // last connection problem logged, to log each once
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

// Open opens the store in dir, creating it, as the owner or as a client of the
// process that owns it. It fails only when the store cannot be used at all:
// ErrCorrupt (see Fallback), ErrNewerSchema, or a directory it cannot create.
// A busy or vanishing owner is not a failure.
func Open(ctx context.Context, dir string, opts Options) (*Shared, error) {
	if err := makeDir(dir); err != nil {
		return nil, err
	}
	sock, err := socketPath(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With("component", "state", "dir", dir)
	return startShared(ctx, dir, &diskSource{dir: dir, sock: sock, log: log}, log, opts)
}

// startShared starts a shared store on src, connecting once within
// ConnectTimeout. Only an error that a retry cannot mend fails it.
func startShared(ctx context.Context, where string, src backendSource, log *slog.Logger, opts Options) (*Shared, error) {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 2 * time.Second
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 5 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	s := &Shared{
		dir: where, src: src, log: log, opts: opts,
		wake: make(chan struct{}, 1), pend: map[string][]*op{}, agents: map[string]*op{}, progress: make(chan struct{}),
		originals: map[string]*Config{}, claims: map[string]bool{}, deleted: map[string]bool{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		err := s.connect(cctx)
		if err == nil {
			break
		}
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrNoSpace) || !errors.Is(err, errConn) && !errors.Is(err, errLocked) {
			s.cancel()
			return nil, err
		}
		if !sleep(cctx, delay) {
			s.log.Warn("no store backend yet; recording in memory", "err", err)
			break
		}
	}
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// connect finds a backend once, from the store's source. The error wraps
// errConn or errLocked when the other side is merely busy or gone.
func (s *Shared) connect(ctx context.Context) error {
	s.mu.Lock()
	claims := slices.Sorted(maps.Keys(s.claims))
	s.mu.Unlock()
	b, owner, err := s.src.connect(ctx, claims)
	if err != nil {
		return err
	}
	s.setBackend(b, owner)
	return nil
}

// A backendSource is where a Shared store finds its backend, and finds it
// again after losing it.
type backendSource interface {
	// connect returns a backend, and whether this process owns the store
	// on disk through it. claims are the sessions this process wrote.
	connect(ctx context.Context, claims []string) (b Store, owner bool, err error)
	// close lets go of what outlives one backend, after the last one closed.
	close() error
	// refuse is why a write for session id must not even be queued (nil:
	// it may be).
	refuse(id string) error
	// holder is the host a listing names for the sessions this process
	// writes ("": a store without leases names none).
	holder() string
	// landed is told of each write of session sid the backend took or
	// refused (err), and whether none of sid's is queued any more. It runs
	// under s.mu and must not block.
	landed(sid string, err error, drained bool)
	// dropped is told of the writes queued when the backend was lost:
	// they wait for the next one.
	dropped(queued []*op)
}

// diskSource is the state directory's: the owner's socket, else badger
// itself, served to the other processes.
type diskSource struct {
	dir, sock string
	log       *slog.Logger
}

func (d *diskSource) connect(ctx context.Context, claims []string) (Store, bool, error) {
	r, derr := dial(ctx, d.sock, claims)
	if derr == nil {
		return r, false, nil
	}
	if errors.Is(derr, ErrNewerSchema) {
		return nil, false, fmt.Errorf("open store %s: %w", d.dir, derr)
	}
	st, err := openBadger(d.dir, d.log)
	if err != nil {
		return nil, false, err
	}
	st.claim(claims...)
	srv, err := serve(st, d.sock, d.log)
	if err != nil {
		// This process can still record; the others wait for a socket.
		d.log.Warn("cannot serve the store to other processes", "err", err)
	}
	return &owned{badgerStore: st, srv: srv}, true, nil
}

func (d *diskSource) close() error { return nil }

// refuse: every process of a host writes every session of its directory.
func (d *diskSource) refuse(string) error { return nil }

func (d *diskSource) holder() string { return "" }

func (d *diskSource) landed(string, error, bool) {}

// dropped: the writes wait in memory for the directory's next owner.
func (d *diskSource) dropped([]*op) {}

func (s *Shared) setBackend(b Store, owner bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backend, s.owner, s.connWarn = b, owner, ""
	s.signal()
}

// signal wakes everyone waiting on progress. s.mu is held.
func (s *Shared) signal() {
	close(s.progress)
	s.progress = make(chan struct{})
}

// drop forgets a backend whose connection failed, so the worker finds another.
func (s *Shared) drop(b Store, err error) {
	s.mu.Lock()
	if s.backend != b {
		s.mu.Unlock()
		return
	}
	s.backend = nil
	s.signal()
	queued := slices.Clone(s.queue)
	s.mu.Unlock()
	s.log.Info("lost store owner; looking for a new one", "err", err)
	b.Close()
	s.src.dropped(queued)
	s.kick()
}

func (s *Shared) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Owner reports whether this process owns the store on disk right now.
func (s *Shared) Owner() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner && s.backend != nil
}

// Dir is the state directory.
func (s *Shared) Dir() string { return s.dir }

// run is the writer: it keeps a backend and applies queued writes to it in
// order. It exits when Close has been called and the queue is empty, or when
// Close's deadline passes.
func (s *Shared) run() {
	defer s.wg.Done()
	delay := 5 * time.Millisecond
	for {
		s.mu.Lock()
		b, closing, n := s.backend, s.closing, len(s.queue)
		var o *op
		if n > 0 {
			o = s.queue[0]
		}
		s.mu.Unlock()
		switch {
		case s.ctx.Err() != nil, closing && n == 0:
			return
		case b == nil:
			if err := s.connect(s.ctx); err != nil {
				s.warnOnce(err)
				sleep(s.ctx, delay)
				delay = min(2*delay, time.Second)
			} else {
				delay = 5 * time.Millisecond
			}
			continue
		case n == 0:
			select {
			case <-s.wake:
			case <-s.ctx.Done():
			}
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.WriteTimeout)
		err := s.apply(ctx, b, o)
		cancel()
		if errors.Is(err, errConn) {
			s.drop(b, err)
			continue
		}
		s.mu.Lock()
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if o.agent != nil {
			// A newer put of the same name stays: it is still the one to read.
			if s.agents[o.agent.Name] == o {
				delete(s.agents, o.agent.Name)
			}
		} else if l := s.pend[o.sid]; len(l) > 0 && l[0] == o {
			if s.pend[o.sid] = l[1:]; len(l) == 1 {
				delete(s.pend, o.sid)
			}
		}
		if o.agent == nil {
			s.src.landed(o.sid, err, len(s.pend[o.sid]) == 0)
		}
		s.done = o.seq
		switch {
		case o.del != nil:
			// The outcome is DeleteSession's to report, not Flush's.
			if err != nil && !errors.Is(err, ErrDeleted) {
				delete(s.deleted, o.sid)
			}
			o.del.done <- err
		case errors.Is(err, ErrDeleted):
			s.deleted[o.sid] = true // by another process: refuse the next write at once
			s.errs = append(s.errs, err)
		case err != nil:
			s.errs = append(s.errs, err)
		}
		s.signal()
		s.mu.Unlock()
		if err != nil && (o.del == nil || !errors.Is(err, ErrNotFound)) {
			s.log.Error("store write failed", o.subject(), "err", err)
		}
	}
}

func (s *Shared) warnOnce(err error) {
	s.mu.Lock()
	msg := err.Error()
	same := msg == s.connWarn
	s.connWarn = msg
	s.mu.Unlock()
	if !same && !errors.Is(err, context.Canceled) {
		s.log.Warn("no store backend; recording in memory", "err", err)
	}
}

// apply lands one write. A refused original (this process did not know the
// stored one when it queued the put) must not cost the rest of the record, so
// the put is repeated without it and the refusal is still reported.
func (s *Shared) apply(ctx context.Context, b Store, o *op) error {
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

// enqueue queues a write. s.mu is held.
func (s *Shared) enqueue(o *op) {
	s.enq++
	o.seq = s.enq
	s.queue = append(s.queue, o)
	if o.agent != nil {
		s.agents[o.agent.Name] = o
	} else {
		s.pend[o.sid] = append(s.pend[o.sid], o)
	}
	s.kick()
}

var errClosed = errors.New("store closed")

// refused is why a write for session id is refused at once, nil if it is
// not: the session was deleted, or (a fleet's store) another sidecar took
// its lease. s.mu is held.
func (s *Shared) refused(id string) error {
	if s.deleted[id] {
		return ErrDeleted
	}
	return s.src.refuse(id)
}

// PutSession queues the write. A different original than the one this process
// knows of is refused at once; one it could not know of (no backend at the
// time) is refused when the write lands, and reported by Flush.
func (s *Shared) PutSession(ctx context.Context, sess *Session) error {
	sess = clone(sess)
	id := sess.ClientID
	if sess.Original != nil {
		if known := s.knownOriginal(ctx, id); known != nil && !sameConfig(known, sess.Original) {
			return fmt.Errorf("put session %s: %w", id, ErrOriginalExists)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return fmt.Errorf("put session %s: %w", id, errClosed)
	}
	if err := s.refused(id); err != nil {
		return fmt.Errorf("put session %s: %w", id, err)
	}
	if sess.Original != nil && s.originals[id] == nil {
		s.originals[id] = sess.Original
	}
	s.claims[id] = true
	s.enqueue(&op{sid: id, session: sess})
	return nil
}

// knownOriginal is the session's stored or queued original as far as this
// process can tell without waiting: remembered, else asked of the backend.
func (s *Shared) knownOriginal(ctx context.Context, id string) *Config {
	s.mu.Lock()
	o, b := s.originals[id], s.backend
	s.mu.Unlock()
	if o != nil || b == nil {
		return o
	}
	got, err := b.Session(ctx, id)
	if err != nil || got.Original == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.originals[id] == nil {
		s.originals[id] = got.Original
	}
	return s.originals[id]
}

func (s *Shared) PutTurn(ctx context.Context, sessionID string, t *Turn) error {
	if err := checkTurn(sessionID, t); err != nil {
		return err
	}
	t = cloneTurn(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, errClosed)
	}
	if err := s.refused(sessionID); err != nil {
		return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, err)
	}
	s.enqueue(&op{sid: sessionID, turn: t})
	return nil
}

func (s *Shared) RollBack(ctx context.Context, sessionID string, keep int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return fmt.Errorf("roll back %s: %w", sessionID, errClosed)
	}
	if err := s.refused(sessionID); err != nil {
		return fmt.Errorf("roll back %s: %w", sessionID, err)
	}
	s.enqueue(&op{sid: sessionID, keep: keep})
	return nil
}

// DeleteSession queues the delete behind every write queued before it, so
// none of them can land after it and write the session back, and waits for
// it to land: for the owner, done on its disk; for a client, done by the
// owner. From the call on, this process refuses writes for id (ErrDeleted)
// and reads it as gone. When ctx ends first the error says so; the delete
// stays queued and lands when a backend takes it (Close tries for up to
// CloseTimeout).
func (s *Shared) DeleteSession(ctx context.Context, id string) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return fmt.Errorf("delete session %s: %w", id, errClosed)
	}
	o := &op{sid: id, del: &deletes{done: make(chan error, 1)}}
	s.enqueue(o)
	s.deleted[id] = true
	delete(s.originals, id)
	delete(s.claims, id)
	s.mu.Unlock()
	select {
	case err := <-o.del.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("delete session %s: not confirmed yet, still queued: %w", id, ctx.Err())
	}
}

// PutAgent queues the write like the others: an agent's initialize result
// learned while no backend is there lands when one is back.
func (s *Shared) PutAgent(ctx context.Context, a *AgentInfo) error {
	if err := checkAgent(a); err != nil {
		return err
	}
	a = clone(a)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return fmt.Errorf("put agent %s: %w", a.Name, errClosed)
	}
	s.enqueue(&op{agent: a})
	return nil
}

// Flush waits until every write queued before the call has landed (for the
// owner: in badger's log; for a client: acknowledged by the owner, who wrote
// it there), and returns the write errors since the last Flush. With no
// backend it waits until ctx ends and returns ctx's error; the writes stay
// queued and land when a backend is back.
func (s *Shared) Flush(ctx context.Context) error {
	s.mu.Lock()
	target := s.enq
	for s.done < target {
		ch := s.progress
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush store %s: %w", s.dir, ctx.Err())
		}
		s.mu.Lock()
	}
	errs := s.errs
	s.errs = nil
	s.mu.Unlock()
	return errors.Join(errs...)
}

// reader returns the backend to read from, waiting up to ConnectTimeout for
// one, and a snapshot of the queued writes of session id (all sessions when id
// is ""). The snapshot is taken first: a write that lands meanwhile is then in
// both, and replaying it twice gives the same result.
func (s *Shared) reader(ctx context.Context, id string) (Store, map[string][]*op, error) {
	s.mu.Lock()
	pend := map[string][]*op{}
	for sid, l := range s.pend {
		if id == "" || sid == id {
			pend[sid] = slices.Clone(l)
		}
	}
	s.mu.Unlock()
	b, err := s.waitBackend(ctx)
	return b, pend, err
}

// waitBackend returns the backend, waiting up to ConnectTimeout for one, or
// nil and no error when none came.
func (s *Shared) waitBackend(ctx context.Context) (Store, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	for {
		s.mu.Lock()
		b, closing, ch := s.backend, s.closing, s.progress
		s.mu.Unlock()
		if closing && b == nil {
			return nil, errClosed
		}
		if b != nil {
			return b, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// readOn runs read on the backend b, and when b's connection breaks under
// it (its owner went away: another sidecar of the host is exiting), once
// more on the next backend, within ConnectTimeout: a read during an
// owner's hand-over waits for the next owner, where it would otherwise
// find none and read what this process has queued alone (a session list
// that named a rebuilt session by its native id). It returns the backend
// the read ran on last (nil when none came), and the read's error, a
// broken connection turned into ErrUnavailable.
func (s *Shared) readOn(ctx context.Context, b Store, read func(b Store) error) (Store, error) {
	err := read(b)
	if !errors.Is(err, errConn) {
		return b, err
	}
	s.drop(b, err)
	next, werr := s.waitBackend(ctx)
	if werr != nil || next == nil {
		return nil, ErrUnavailable
	}
	return next, s.readErr(next, read(next))
}

// readErr turns a backend's connection failure into "no backend".
func (s *Shared) readErr(b Store, err error) error {
	if errors.Is(err, errConn) {
		s.drop(b, err)
		return ErrUnavailable
	}
	return err
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
		_, err = s.readOn(ctx, b, func(b Store) (err error) {
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
		s.mu.Lock()
		got.Original = clone(s.originals[id])
		s.mu.Unlock()
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
		_, err = s.readOn(ctx, b, func(b Store) (err error) {
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
		b, err = s.readOn(ctx, b, func(b Store) (err error) {
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
	_, err = s.readOn(ctx, b, func(b Store) (err error) {
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
	s.mu.Lock()
	o := s.agents[name]
	s.mu.Unlock()
	if o != nil {
		return clone(o.agent), nil
	}
	b, err := s.waitBackend(ctx)
	if err == nil && b == nil {
		err = ErrUnavailable
	}
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, err)
	}
	var a *AgentInfo
	_, err = s.readOn(ctx, b, func(b Store) (err error) {
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
// many.
func (s *Shared) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.mu.Unlock()
	s.kick()
	t := time.AfterFunc(s.opts.CloseTimeout, s.cancel)
	s.wg.Wait()
	t.Stop()
	s.cancel()
	s.mu.Lock()
	b, lost := s.backend, len(s.queue)
	for _, o := range s.queue {
		if o.del != nil {
			o.del.done <- fmt.Errorf("delete session %s: %w: no backend took it before close", o.sid, errClosed)
		}
	}
	s.backend = nil
	s.signal()
	s.mu.Unlock()
	var err error
	if b != nil {
		err = b.Close()
	}
	err = errors.Join(err, s.src.close())
	if lost > 0 {
		err = errors.Join(err, fmt.Errorf("close store %s: %d writes not stored: no backend", s.dir, lost))
	}
	return err
}
