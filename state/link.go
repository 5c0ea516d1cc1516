package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// A backendSource is where a Shared store finds its backend, and finds it
// again after losing it.
type backendSource interface {
	// refuse and landed are the source's say on each session's writes,
	// asked by the write queue.
	gate
	// connect returns a backend, and whether this process owns the store
	// on disk through it. claims are the sessions this process wrote.
	connect(ctx context.Context, claims []string) (b Store, owner bool, err error)
	// close lets go of what outlives one backend, after the last one closed.
	close() error
	// holder is the host a listing names for the sessions this process
	// writes ("": a store without leases names none).
	holder() string
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

// link is a Shared store's hold on its backend: it finds one through the
// source, hands it to the worker and to reads, and forgets it when its
// connection breaks, so that the next use finds another (the directory's
// next owner). A read waits for a backend, within ConnectTimeout; the
// worker never does, it keeps looking.
type link struct {
	src     backendSource
	log     *slog.Logger
	timeout time.Duration // ConnectTimeout: how long a read waits for a backend
	// lost runs after a broken backend was forgotten and closed, outside
	// mu, once for each: the store hands the writes still queued to the
	// source and wakes its worker to find the next backend. It may use the
	// link.
	lost func()

	mu      sync.Mutex
	backend Store // nil while there is none
	owner   bool
	closing bool          // Close was called: a read no longer waits for a backend
	changed chan struct{} // closed (and replaced) when the backend changes
	warned  string        // last connection problem logged, to log each once
}

func newLink(src backendSource, log *slog.Logger, timeout time.Duration, lost func()) *link {
	return &link{src: src, log: log, timeout: timeout, lost: lost, changed: make(chan struct{})}
}

// signal wakes everyone waiting on changed. l.mu is held.
func (l *link) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// connect finds a backend once, from the source, and makes it the one to
// use. claims are the sessions this process writes. The error wraps
// errConn or errLocked when the other side is merely busy or gone.
func (l *link) connect(ctx context.Context, claims []string) error {
	b, owner, err := l.src.connect(ctx, claims)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.backend, l.owner, l.warned = b, owner, ""
	l.signal()
	return nil
}

// current is the backend (nil: none) and a channel closed when it changes.
func (l *link) current() (Store, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.backend, l.changed
}

// isOwner reports whether this process owns the store on disk right now.
func (l *link) isOwner() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owner && l.backend != nil
}

// warnOnce logs that no backend was found, unless the last attempt failed
// the same way: the worker retries every second at most, and one line says
// it all.
func (l *link) warnOnce(err error) {
	l.mu.Lock()
	msg := err.Error()
	same := msg == l.warned
	l.warned = msg
	l.mu.Unlock()
	if !same && !errors.Is(err, context.Canceled) {
		l.log.Warn("no store backend; recording in memory", "err", err)
	}
}

// drop forgets a backend whose connection failed with err, so the worker
// finds another. A backend already forgotten (the worker and a read both
// saw it break) is left alone.
func (l *link) drop(b Store, err error) {
	l.mu.Lock()
	if l.backend != b {
		l.mu.Unlock()
		return
	}
	l.backend = nil
	l.signal()
	l.mu.Unlock()
	l.log.Info("lost store owner; looking for a new one", "err", err)
	b.Close()
	l.lost()
}

// wait returns the backend, waiting up to ConnectTimeout for one, or nil
// and no error when none came. Once Close was called it waits for none.
func (l *link) wait(ctx context.Context) (Store, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	for {
		l.mu.Lock()
		b, closing, ch := l.backend, l.closing, l.changed
		l.mu.Unlock()
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
func (l *link) readOn(ctx context.Context, b Store, read func(b Store) error) (Store, error) {
	err := read(b)
	if !errors.Is(err, errConn) {
		return b, err
	}
	l.drop(b, err)
	next, werr := l.wait(ctx)
	if werr != nil || next == nil {
		return nil, ErrUnavailable
	}
	return next, l.readErr(next, read(next))
}

// readErr turns a backend's connection failure into "no backend".
func (l *link) readErr(b Store, err error) error {
	if errors.Is(err, errConn) {
		l.drop(b, err)
		return ErrUnavailable
	}
	return err
}

// shutdown is Close's first step: from now on a read that finds no
// backend fails at once instead of waiting for one.
func (l *link) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing = true
}

// release is Close's last step, once the worker has stopped: it lets go of
// the backend and returns it, for the caller to close.
func (l *link) release() Store {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.backend
	l.backend = nil
	l.signal()
	return b
}
