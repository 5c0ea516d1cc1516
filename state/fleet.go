package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

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
		pg.Holder = thisHolder()
	}
	where := PostgresWhere(cfg.ConnConfig)
	src := &fleetSource{dsn: dsn, opts: pg}
	s, err := startShared(ctx, where, src, opts.Logger.With("component", "state", "store", where), opts)
	if err != nil {
		return nil, err
	}
	return &Fleet{Shared: s, src: src}, nil
}

// Where names the database by host and name, never with its password.
func (f *Fleet) Where() string { return f.dir }

// Acquire implements Leaser. It waits for the database as a read does, and
// fails with ErrUnavailable when it is out of reach.
func (f *Fleet) Acquire(ctx context.Context, id string, takeover bool) error {
	b, err := f.waitBackend(ctx)
	if err != nil {
		return fmt.Errorf("take the lease of %s: %w", id, err)
	}
	if b == nil {
		return fmt.Errorf("take the lease of %s: %w", id, ErrUnavailable)
	}
	err = b.(fleetBackend).Acquire(ctx, id, takeover)
	if errors.Is(err, errConn) {
		f.drop(b, err)
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
	f.mu.Lock()
	b := f.backend
	f.mu.Unlock()
	if b == nil {
		if le, lost := f.Lost(id); lost {
			return le
		}
		return nil
	}
	err := b.(fleetBackend).Confirm(ctx, id)
	if errors.Is(err, errConn) {
		f.drop(b, err)
		return nil
	}
	return err
}

// Sharing implements Leaser.
func (f *Fleet) Sharing(id string) (bool, string) {
	if le, lost := f.Lost(id); lost {
		return false, le.Error()
	}
	f.mu.Lock()
	b, waiting := f.backend, len(f.pend[id])
	f.mu.Unlock()
	if b == nil {
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
