package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
//
// Shared is the Store face and the worker between two owners: the queue
// (queue.go), which holds the writes and what they tell of this process's
// sessions, and the link (link.go), which holds the backend. Reads merge
// the two (overlay.go).
type Shared struct {
	dir  string // the state directory, or the fleet's database, for messages
	src  backendSource
	log  *slog.Logger
	opts Options

	writes *queue // what this process wrote and has not landed yet
	link   *link  // the backend the writes land on and reads ask

	ctx    context.Context // ends when Close gives up on the queue
	cancel context.CancelFunc
	wg     sync.WaitGroup // the worker, run
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
	s := &Shared{dir: where, src: src, log: log, opts: opts, writes: newQueue(src)}
	s.link = newLink(src, log, opts.ConnectTimeout, s.lost)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		err := s.link.connect(cctx, s.writes.claimed())
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

// lost is the link's hook for a backend whose connection broke: the writes
// still queued wait for the next one, the source may keep them meanwhile
// (a fleet's keeps them in the host's store), and the worker goes looking.
func (s *Shared) lost() {
	s.src.dropped(s.writes.queued())
	s.writes.kick()
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
func (s *Shared) Owner() bool { return s.link.isOwner() }

// Dir is the state directory.
func (s *Shared) Dir() string { return s.dir }

// run is the writer: it keeps a backend and applies queued writes to it in
// order. It exits when Close has been called and the queue is empty, or when
// Close's deadline passes.
func (s *Shared) run() {
	defer s.wg.Done()
	delay := 5 * time.Millisecond
	for {
		b, _ := s.link.current()
		o, n, closing := s.writes.head()
		switch {
		case s.ctx.Err() != nil, closing && n == 0:
			return
		case b == nil:
			if err := s.link.connect(s.ctx, s.writes.claimed()); err != nil {
				s.link.warnOnce(err)
				sleep(s.ctx, delay)
				delay = min(2*delay, time.Second)
			} else {
				delay = 5 * time.Millisecond
			}
			continue
		case n == 0:
			select {
			case <-s.writes.wake:
			case <-s.ctx.Done():
			}
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.WriteTimeout)
		err := o.apply(ctx, b)
		cancel()
		if errors.Is(err, errConn) {
			s.link.drop(b, err)
			continue
		}
		s.writes.landed(o, err)
		if err != nil && (o.del == nil || !errors.Is(err, ErrNotFound)) {
			s.log.Error("store write failed", o.subject(), "err", err)
		}
	}
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
	if err := s.writes.add(&op{sid: id, session: sess}); err != nil {
		return fmt.Errorf("put session %s: %w", id, err)
	}
	return nil
}

// knownOriginal is the session's stored or queued original as far as this
// process can tell without waiting: remembered, else asked of the backend.
func (s *Shared) knownOriginal(ctx context.Context, id string) *Config {
	o := s.writes.original(id)
	b, _ := s.link.current()
	if o != nil || b == nil {
		return o
	}
	got, err := b.Session(ctx, id)
	if err != nil || got.Original == nil {
		return nil
	}
	return s.writes.remember(id, got.Original)
}

func (s *Shared) PutTurn(ctx context.Context, sessionID string, t *Turn) error {
	if err := checkTurn(sessionID, t); err != nil {
		return err
	}
	t = cloneTurn(t)
	if err := s.writes.add(&op{sid: sessionID, turn: t}); err != nil {
		return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, err)
	}
	return nil
}

func (s *Shared) RollBack(ctx context.Context, sessionID string, keep int) error {
	if err := s.writes.add(&op{sid: sessionID, keep: keep}); err != nil {
		return fmt.Errorf("roll back %s: %w", sessionID, err)
	}
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
	o := &op{sid: id, del: &deletes{done: make(chan error, 1)}}
	if err := s.writes.add(o); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
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
	if err := s.writes.add(&op{agent: a}); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	}
	return nil
}

// Flush waits until every write queued before the call has landed (for the
// owner: in badger's log; for a client: acknowledged by the owner, who wrote
// it there), and returns the write errors since the last Flush. With no
// backend it waits until ctx ends and returns ctx's error; the writes stay
// queued and land when a backend is back.
func (s *Shared) Flush(ctx context.Context) error {
	errs, err := s.writes.flush(ctx)
	if err != nil {
		return fmt.Errorf("flush store %s: %w", s.dir, err)
	}
	return errors.Join(errs...)
}

// Close lands the queued writes (for up to CloseTimeout), then lets go of the
// backend: an owner stops serving and closes badger, and a client of it takes
// over. Writes still queued at the deadline are lost and the error says how
// many.
func (s *Shared) Close() error {
	if !s.writes.close() {
		return nil
	}
	s.link.shutdown()
	t := time.AfterFunc(s.opts.CloseTimeout, s.cancel)
	s.wg.Wait()
	t.Stop()
	s.cancel()
	lost := s.writes.abandon()
	b := s.link.release()
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
