package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Fleet is the store of a fleet of sidecars on several hosts: the record on
// PostgreSQL (DESIGN.md "The store"), behind the same write queue as the
// store of one host (Shared), so that a database out of reach never stops
// the relay: writes wait in memory and land, in order, once it is back.
// Each session is written by one sidecar at a time, the holder of its lease
// (Leaser).
type Fleet struct {
	*Shared
	src *fleetSource

	stopReplay context.CancelFunc // ends replayKept
	replaying  sync.WaitGroup
}

// Close ends the replay of what an earlier sidecar kept, then closes the
// store (Shared.Close): what is queued lands, and the leases are released.
func (f *Fleet) Close() error {
	if f.stopReplay != nil {
		f.stopReplay()
	}
	f.replaying.Wait()
	return f.Shared.Close()
}

// OpenPostgres opens the fleet's store on the database dsn names: a
// postgres:// URL or a key=value string, whatever it leaves out read from
// the PG* variables and ~/.pgpass as libpq does. It fails only when the
// store cannot be used at all: a connection string that does not parse, or
// a schema newer than this binary's (ErrNewerSchema). A database out of
// reach is not a failure: the store records in memory until it is back.
func OpenPostgres(ctx context.Context, dsn string, opts Options, pg PostgresOptions) (*Fleet, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("open the PostgreSQL store: the connection string does not parse (it is not shown: it may hold a password)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if pg.Logger == nil {
		pg.Logger = opts.Logger
	}
	if pg.Holder.Instance == "" {
		pg.Holder = ThisHolder("")
	}
	if pg.LeaseCallTimeout <= 0 {
		pg.LeaseCallTimeout = 5 * time.Second
	}
	where := PostgresWhere(cfg.ConnConfig)
	src := &fleetSource{dsn: dsn, opts: pg}
	if pg.Local != nil {
		src.keep = &localKeep{store: pg.Local, dir: filepath.Join(pg.LocalDir, localKeepDir), marked: map[string]bool{}, refused: map[string]bool{}, log: opts.Logger}
	}
	s, err := startShared(ctx, where, src, opts.Logger.With("component", "state", "store", where), opts)
	if err != nil {
		return nil, err
	}
	f := &Fleet{Shared: s, src: src}
	if src.keep != nil {
		rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		f.stopReplay = stop
		f.replaying.Add(1)
		go func() {
			// Owned by the Fleet: Close ends it.
			defer f.replaying.Done()
			f.replayKept(rctx)
		}()
	}
	return f, nil
}

// Where names the database by host and name, never with its password.
func (f *Fleet) Where() string { return f.dir }

// Acquire implements Leaser. It waits for the database as a read does, and
// fails with ErrUnavailable when it is out of reach.
func (f *Fleet) Acquire(ctx context.Context, id string, takeover bool) error {
	b, err := f.link.wait(ctx)
	if err != nil {
		return fmt.Errorf("take the lease of %s: %w", id, err)
	}
	if b == nil {
		return fmt.Errorf("take the lease of %s: %w", id, ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, f.src.opts.LeaseCallTimeout)
	defer cancel()
	err = b.(fleetBackend).Acquire(ctx, id, takeover)
	if errors.Is(err, errConn) {
		f.link.drop(b, err)
		return fmt.Errorf("take the lease of %s: %w: %w", id, ErrUnavailable, err)
	}
	return err
}

// Lost implements Leaser.
func (f *Fleet) Lost(id string) (*LeaseError, bool) {
	p := f.src.store()
	if p == nil {
		return nil, false
	}
	return p.Lost(id)
}

// Confirm implements Leaser. With the database out of reach it confirms
// nothing and refuses nothing: the session goes on here, not shared.
func (f *Fleet) Confirm(ctx context.Context, id string) error {
	b, _ := f.link.current()
	if b == nil {
		if le, lost := f.Lost(id); lost {
			return le
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.src.opts.LeaseCallTimeout)
	defer cancel()
	err := b.(fleetBackend).Confirm(ctx, id)
	if errors.Is(err, errConn) {
		f.link.drop(b, err)
		return nil
	}
	return err
}

// Sharing implements Leaser.
func (f *Fleet) Sharing(id string) (bool, string) {
	if le, lost := f.Lost(id); lost {
		return false, le.Error()
	}
	b, _ := f.link.current()
	if b == nil {
		waiting := f.writes.waiting(id)
		return false, fmt.Sprintf("the fleet's store (%s) is out of reach: %d of this session's writes wait in this sidecar's memory, and land once it is back", f.dir, waiting)
	}
	return true, ""
}

// fleetSource is the fleet's database: one pgStore, opened at the first
// connect that reaches the database, and kept: its pool reconnects by
// itself, and its leases outlive a broken connection.
type fleetSource struct {
	dsn  string
	opts PostgresOptions
	keep *localKeep // nil: no local store

	mu sync.Mutex
	p  *pgStore
}

func (f *fleetSource) store() *pgStore {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.p
}

func (f *fleetSource) connect(ctx context.Context, _ []string) (Store, bool, error) {
	p := f.store()
	if p == nil {
		var err error
		if p, err = openPostgres(ctx, f.dsn, f.opts); err != nil {
			return nil, false, err
		}
		f.mu.Lock()
		f.p = p
		f.mu.Unlock()
	} else if err := p.pool.Ping(ctx); err != nil {
		return nil, false, fmt.Errorf("reach the PostgreSQL store %s: %w", p.where, pgErr(err))
	}
	return fleetBackend{p}, false, nil
}

func (f *fleetSource) close() error {
	if p := f.store(); p != nil {
		return p.Close()
	}
	return nil
}

func (f *fleetSource) refuse(id string) error {
	if p := f.store(); p != nil {
		if le, lost := p.Lost(id); lost {
			return le
		}
	}
	return nil
}

func (f *fleetSource) holder() string { return f.opts.Holder.Host }

// dropped keeps the writes that were queued when the database went out of
// reach in the host's store too.
func (f *fleetSource) dropped(queued []*op) {
	if f.keep == nil {
		return
	}
	ctx := context.Background() // the host's store takes a write at once: it queues it
	for _, o := range queued {
		var err error
		switch {
		case o.sid == "" || o.del != nil:
			continue // agents are re-learnt; a delete waits for the database
		case o.session != nil:
			err = f.keep.store.PutSession(ctx, o.session)
		case o.turn != nil:
			err = f.keep.store.PutTurn(ctx, o.sid, o.turn)
		default:
			err = f.keep.store.RollBack(ctx, o.sid, o.keep)
		}
		if merr := f.keep.mark(o.sid); merr != nil {
			err = errors.Join(err, merr)
		}
		if err != nil {
			f.keep.log.Warn("keep a queued write in the host's store", "session", o.sid, "err", err)
		}
	}
}

func (f *fleetSource) landed(sid string, err error, drained bool) {
	if f.keep != nil {
		f.keep.landed(sid, err, drained)
	}
}

// fleetBackend is the pgStore as the write queue's backend. Dropping it
// after a broken connection keeps the store: Close is the source's.
type fleetBackend struct{ *pgStore }

func (fleetBackend) Close() error { return nil }

var (
	_ Store  = (*Fleet)(nil)
	_ Leaser = (*Fleet)(nil)
)

// DescribePostgres names the database a connection string points at, by
// host and name: what the sidecar shows of it, never the password. Its
// error does not quote the string either.
func DescribePostgres(dsn string) (string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "", errors.New("the PostgreSQL connection string does not parse (it is not shown: it may hold a password)")
	}
	return PostgresWhere(cfg.ConnConfig), nil
}

// WatchChannel is the channel the fleet's database notifies with a
// session's id whenever the session or its turns change (pgschema 0002).
const WatchChannel = "acp_sidecar_sessions"

// Watch calls changed with the id of each session that changes, as the
// database notifies it (LISTEN), until ctx ends (nil) or the connection
// breaks. A transaction notifies each id once; the data is the caller's to
// read after. listening is called once the database listens, before any
// change: what the caller reads then misses nothing that follows.
func (f *Fleet) Watch(ctx context.Context, listening func(), changed func(id string)) error {
	p := f.src.store()
	if p == nil {
		return fmt.Errorf("watch %s: %w", f.dir, ErrUnavailable)
	}
	pooled, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", f.dir, pgErr(err))
	}
	// A connection that waited for notifications is not given back for
	// queries: its wait may have ended mid-message. It is the watch's own.
	conn := pooled.Hijack()
	defer conn.Close(context.Background()) // it goes away either way; a failed goodbye changes nothing
	if _, err := conn.Exec(ctx, "LISTEN "+WatchChannel); err != nil {
		return fmt.Errorf("watch %s: %w", f.dir, pgErr(err))
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: %w", f.dir, pgErr(err))
		}
		changed(n.Payload)
	}
}

// localKeepDir is where, in the state dir, the fleet's store marks the
// sessions whose writes it kept in the host's own store while the database
// was out of reach: one empty file a session, named by its escaped id.
const localKeepDir = "fleet-kept"

// localKeep is the host's own store as the fleet's store's keeper while
// the database is out of reach.
type localKeep struct {
	store   Store
	dir     string
	log     *slog.Logger
	mu      sync.Mutex
	marked  map[string]bool // sessions with a mark
	refused map[string]bool // of them, those a write of was refused (the lease was lost)
}

func (k *localKeep) mark(sid string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.marked[sid] {
		return nil
	}
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(k.dir, url.PathEscape(sid)), nil, 0o600); err != nil {
		return err
	}
	k.marked[sid] = true
	return nil
}

func (k *localKeep) isMarked(sid string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.marked[sid]
}

// landed lifts a session's mark once every write of it landed in the
// database; a write the database refused (another host took the session)
// keeps it, and the local copy with it.
func (k *localKeep) landed(sid string, err error, drained bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.marked[sid] {
		return
	}
	var le *LeaseError
	if errors.As(err, &le) {
		if !k.refused[sid] {
			k.log.Warn("the fleet's database refused writes this sidecar kept while it was out of reach: another sidecar took the session meanwhile; they stay in this host's state dir", "session", sid, "holder", le.Holder.String())
		}
		k.refused[sid] = true
		return
	}
	if !drained || err != nil || k.refused[sid] {
		return
	}
	if rerr := os.Remove(filepath.Join(k.dir, url.PathEscape(sid))); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		k.log.Warn("lift the mark of a session kept locally", "session", sid, "err", rerr)
		return
	}
	delete(k.marked, sid)
}

// keepLocally writes what write does to session sid in the host's own
// store too, while the database is out of reach or the session has writes
// kept there already: a sidecar killed before they land loses none.
func (f *Fleet) keepLocally(sid string, write func(Store) error) {
	k := f.src.keep
	if k == nil {
		return
	}
	if b, _ := f.link.current(); b != nil && !k.isMarked(sid) {
		return
	}
	if err := k.mark(sid); err != nil {
		f.log.Warn("mark a session kept in the host's store", "session", sid, "err", err)
	}
	if err := write(k.store); err != nil {
		f.log.Warn("keep a write in the host's store", "session", sid, "err", err)
	}
}

// PutSession queues the write for the database (Shared.PutSession), and
// keeps it in the host's store while the database is out of reach.
func (f *Fleet) PutSession(ctx context.Context, s *Session) error {
	if err := f.Shared.PutSession(ctx, s); err != nil {
		return err
	}
	f.keepLocally(s.ClientID, func(l Store) error { return l.PutSession(ctx, s) })
	return nil
}

// PutTurn is PutSession's counterpart for a turn.
func (f *Fleet) PutTurn(ctx context.Context, sessionID string, t *Turn) error {
	if err := f.Shared.PutTurn(ctx, sessionID, t); err != nil {
		return err
	}
	f.keepLocally(sessionID, func(l Store) error { return l.PutTurn(ctx, sessionID, t) })
	return nil
}

// RollBack is PutSession's counterpart for a rollback.
func (f *Fleet) RollBack(ctx context.Context, sessionID string, keep int) error {
	if err := f.Shared.RollBack(ctx, sessionID, keep); err != nil {
		return err
	}
	f.keepLocally(sessionID, func(l Store) error { return l.RollBack(ctx, sessionID, keep) })
	return nil
}

// replayKept queues, for the database, what a sidecar before this one
// kept in the host's store and could not land: each marked session's
// record and turns, as the host's store has them, once this sidecar holds
// the session's lease. A lease of this host's that outlived its sidecar
// (killed during the outage) is waited out; one another host holds is
// not: the local copy and its mark stay, and the log says so.
func (f *Fleet) replayKept(ctx context.Context) {
	k := f.src.keep
	ents, err := os.ReadDir(k.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("read the sessions kept in the host's store", "err", err)
		}
		return
	}
	for _, e := range ents {
		sid, err := url.PathUnescape(e.Name())
		if err != nil {
			continue // not a mark of ours
		}
		if !f.leaseForReplay(ctx, sid) {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if err := f.replay(ctx, sid); err != nil {
			f.log.Warn("replay a session kept in the host's store", "session", sid, "err", err)
		}
	}
}

// leaseForReplay takes session sid's lease for the replay of what was kept
// of it, waiting out this host's lease of a sidecar that died and a
// database out of reach. False: another host holds it, or ctx ended.
func (f *Fleet) leaseForReplay(ctx context.Context, sid string) bool {
	for {
		err := f.Acquire(ctx, sid, false)
		var le *LeaseError
		var wait time.Duration
		switch {
		case err == nil:
			return true
		case errors.As(err, &le) && !le.Fenced && le.Holder.Host == f.src.opts.Holder.Host:
			wait = time.Until(le.Until) + 10*time.Millisecond // this host's sidecar that died: its lease runs out then
		case errors.Is(err, ErrUnavailable):
			wait = time.Second // the database is still out of reach
		default:
			k := f.src.keep
			k.mu.Lock()
			k.marked[sid], k.refused[sid] = true, true
			k.mu.Unlock()
			f.log.Warn("a session kept in the host's store while the fleet's database was out of reach is another sidecar's now; its local copy stays in the state dir", "session", sid, "err", err)
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// replay queues session sid's record and turns from the host's store.
func (f *Fleet) replay(ctx context.Context, sid string) error {
	k := f.src.keep
	// The record itself is kept only if it changed during the outage; the
	// database has the one written before.
	sess, err := k.store.Session(ctx, sid)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	turns, err := k.store.Turns(ctx, sid)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.marked[sid] = true
	k.mu.Unlock()
	if sess != nil {
		if err := f.Shared.PutSession(ctx, sess); err != nil {
			return err
		}
	}
	for i := range turns {
		if err := f.Shared.PutTurn(ctx, sid, &turns[i]); err != nil {
			return err
		}
	}
	f.log.Info("replaying a session kept in the host's store while the fleet's database was out of reach", "session", sid, "turns", len(turns))
	return nil
}

// KeptSessions are the sessions a sidecar of this host kept in the host's
// store (stateDir) while the fleet's database was out of reach, whose
// writes the database has not taken yet: not shared with the fleet.
func KeptSessions(stateDir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(stateDir, localKeepDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the sessions kept on this host: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if id, err := url.PathUnescape(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
