package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresOptions tune the fleet's store. The zero value is ready to use.
type PostgresOptions struct {
	// Logger gets the store's warnings. Nil discards them.
	Logger *slog.Logger
	// LeaseTTL is how long a session's lease lasts unrenewed; it is renewed
	// every third of it. Zero means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Holder names this process in the leases it takes. Zero: this host,
	// this pid and a random instance.
	Holder Holder
	// LeaseCallTimeout bounds a lease's check before a prompt and its
	// taking before a load, which hold the client's request: a database
	// that does not answer in time counts as out of reach. Zero: 5 s.
	LeaseCallTimeout time.Duration
	// Local is the host's own store (the state dir's), where the fleet's
	// store also keeps a session's writes while the database is out of
	// reach, so that a sidecar killed meanwhile loses none of them; the
	// next one to open the fleet's store in LocalDir replays them. Nil:
	// they wait in memory only.
	Local    Store
	LocalDir string
}

// DefaultLeaseTTL is --lease-ttl's default: a host that died frees its
// sessions this long after its last renewal.
const DefaultLeaseTTL = 15 * time.Second

// pgStore is the record on PostgreSQL, shared by a fleet of sidecars
// (DESIGN.md "The store"). Each write runs in one transaction that first
// locks the session's row and checks the session's lease: a sidecar writes a
// session only at the epoch it took the lease at, so one that slept or was
// cut off past its lease is fenced, and never forks the record. Writes are
// synchronous: a write that returned has committed.
type pgStore struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	me    Holder
	ttl   time.Duration
	where string // host and database, for messages: never the password

	mu   sync.Mutex
	held map[string]int64       // sessions whose lease this store holds -> epoch
	lost map[string]*LeaseError // sessions whose lease another took since

	stop chan struct{} // closed by Close: the renewal ends
	wg   sync.WaitGroup
}

// openPostgres connects to the database dsn names (a URL or key=value
// string; what it leaves out comes from the PG* variables and ~/.pgpass, as
// libpq does), migrates its schema and starts renewing leases.
func openPostgres(ctx context.Context, dsn string, opts PostgresOptions) (*pgStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can quote the string, password and all.
		return nil, errors.New("open the PostgreSQL store: the connection string does not parse (it is not shown: it may hold a password)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.Holder.Instance == "" {
		opts.Holder = ThisHolder("")
	}
	where := PostgresWhere(cfg.ConnConfig)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open the PostgreSQL store %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open the PostgreSQL store %s: %w", where, pgErr(err))
	}
	if _, err := migratePostgres(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open the PostgreSQL store %s: %w", where, pgErr(err))
	}
	p := &pgStore{
		pool: pool, log: opts.Logger.With("component", "state", "store", where), me: opts.Holder, ttl: opts.LeaseTTL, where: where,
		held: map[string]int64{}, lost: map[string]*LeaseError{}, stop: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.renewal()
	return p, nil
}

// PostgresWhere names a database by host and name only, the way the
// sidecar shows a PostgreSQL store: never its user's password.
func PostgresWhere(c *pgx.ConnConfig) string {
	host := c.Host
	if len(host) > 0 && host[0] == '/' {
		host = "unix socket " + host
	} else if c.Port != 0 && c.Port != 5432 {
		host = net.JoinHostPort(host, fmt.Sprint(c.Port))
	}
	db := c.Database
	if db == "" {
		db = c.User // libpq's default: the database named after the user
	}
	return fmt.Sprintf("database %s on %s", db, host)
}

// ThisHolder names this process: host (the system's host name when ""),
// its pid, and a random instance.
func ThisHolder(host string) Holder {
	var err error
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			host = "unknown-host" // a lease still fences by instance; the name is for people
		}
	}
	b := make([]byte, 8)
	rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return Holder{Host: host, PID: os.Getpid(), Instance: hex.EncodeToString(b)}
}

// Where is the database this store uses, for show and sessions.
func (p *pgStore) Where() string { return p.where }

// pgErr marks an error that says the database could not be reached (not
// that it refused the write) as errConn, so that the shared store keeps the
// write and tries again.
func pgErr(err error) error {
	if err == nil || errors.Is(err, errConn) {
		return err
	}
	var le *LeaseError
	if errors.As(err, &le) || errors.Is(err, ErrDeleted) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrOriginalExists) || errors.Is(err, ErrNewerSchema) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "53", "57": // connection exception, insufficient resources, operator intervention
			return fmt.Errorf("%w: %w", errConn, err)
		}
		return err
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, pgx.ErrTooManyRows) || errors.As(err, &syntax) || errors.As(err, &typ) {
		return err // a bug or a damaged row: trying again changes nothing
	}
	// Anything else (a refused or broken connection, a timeout, a
	// connection that died in the middle) means the database was not there
	// to answer. Writes are safe to repeat.
	return fmt.Errorf("%w: %w", errConn, err)
}

// lease modes of fence: a plain write takes only a free lease and never
// one it lost; an acquire (the client's load) takes a free or expired one,
// even one it lost; a takeover takes it from anyone.
type leaseMode int

const (
	leaseWrite leaseMode = iota
	leaseAcquire
	leaseTakeover
)

// fence locks session id's row in tx and makes sure this store may write
// it: not deleted, and its lease this store's at the epoch it took it. A
// free lease is taken at the next epoch; took is that epoch, the store's
// once tx commits (0: it held the lease already).
func (p *pgStore) fence(ctx context.Context, tx pgx.Tx, id string, mode leaseMode) (took int64, err error) {
	var deleted bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM acp_sidecar.deleted_sessions WHERE client_id = $1)", id).Scan(&deleted); err != nil {
		return 0, err
	}
	if deleted {
		return 0, ErrDeleted
	}
	p.mu.Lock()
	epoch, mine := p.held[id]
	lost := p.lost[id]
	p.mu.Unlock()
	if lost != nil && mode == leaseWrite {
		return 0, lost
	}
	var (
		lr   leaseRow
		live bool
	)
	row := func() error {
		return tx.QueryRow(ctx, `SELECT `+leaseColumns+`, coalesce(lease_expires > now(), false)
			FROM acp_sidecar.sessions WHERE client_id = $1 FOR UPDATE`, id).Scan(append(lr.dest(), &live)...)
	}
	err = row()
	if errors.Is(err, pgx.ErrNoRows) && mode != leaseWrite {
		return 0, nil // a session the store does not have: its first write takes the lease
	}
	if errors.Is(err, pgx.ErrNoRows) {
		tag, ierr := tx.Exec(ctx, `INSERT INTO acp_sidecar.sessions (client_id, lease_instance, lease_host, lease_pid, lease_epoch, lease_expires)
			VALUES ($1, $2, $3, $4, 1, now() + make_interval(secs => $5)) ON CONFLICT (client_id) DO NOTHING`,
			id, p.me.Instance, p.me.Host, p.me.PID, p.ttl.Seconds())
		if ierr != nil {
			return 0, ierr
		}
		if tag.RowsAffected() == 1 {
			return 1, nil
		}
		// Another sidecar made the row meanwhile; the insert waited for
		// its commit. Read its lease like any other.
		err = row()
	}
	if err != nil {
		return 0, err
	}
	theirs := *lr.err(id, false)
	ours := lr.held(p.me.Instance)
	switch {
	case mine && ours && lr.epoch == epoch:
		return 0, nil
	case mine:
		// Another took the lease since this store took it: fenced.
		theirs.Fenced = true
		p.mu.Lock()
		delete(p.held, id)
		p.lost[id] = &theirs
		p.mu.Unlock()
		p.log.Warn("lost a session's lease to another sidecar; it is no longer written here", "session", id, "holder", theirs.Holder.String())
		if mode == leaseWrite {
			return 0, &theirs
		}
	}
	if live && !ours && mode != leaseTakeover {
		return 0, &theirs
	}
	if err := tx.QueryRow(ctx, `UPDATE acp_sidecar.sessions
		SET lease_instance = $2, lease_host = $3, lease_pid = $4, lease_epoch = lease_epoch + 1, lease_expires = now() + make_interval(secs => $5)
		WHERE client_id = $1 RETURNING lease_epoch`, id, p.me.Instance, p.me.Host, p.me.PID, p.ttl.Seconds()).Scan(&took); err != nil {
		return 0, err
	}
	return took, nil
}

// leaseColumns are a session row's lease, in leaseRow.dest's order.
const leaseColumns = "lease_instance, lease_host, lease_pid, lease_epoch, lease_expires"

// leaseRow is a session's lease as the database holds it; every column
// but the epoch may be NULL.
type leaseRow struct {
	inst, host *string
	pid        *int32
	epoch      int64
	until      *time.Time
}

// dest are the Scan destinations of leaseColumns.
func (l *leaseRow) dest() []any { return []any{&l.inst, &l.host, &l.pid, &l.epoch, &l.until} }

// held says whether the lease is instance's.
func (l *leaseRow) held(instance string) bool { return l.inst != nil && *l.inst == instance }

// err is the error that names the lease's holder, for session id.
func (l *leaseRow) err(id string, fenced bool) *LeaseError {
	le := &LeaseError{Session: id, Fenced: fenced}
	if l.host != nil {
		le.Holder.Host = *l.host
	}
	if l.pid != nil {
		le.Holder.PID = int(*l.pid)
	}
	if l.inst != nil {
		le.Holder.Instance = *l.inst
	}
	if l.until != nil {
		le.Until = *l.until
	}
	return le
}

// write runs fn in one transaction that holds session id's lease (fence).
func (p *pgStore) write(ctx context.Context, what, id string, mode leaseMode, fn func(tx pgx.Tx) error) error {
	var took int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var err error
		if took, err = p.fence(ctx, tx, id, mode); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, pgErr(err))
	}
	if took != 0 {
		p.mu.Lock()
		p.held[id] = took
		delete(p.lost, id)
		p.mu.Unlock()
	}
	return nil
}

// Acquire implements Leaser.
func (p *pgStore) Acquire(ctx context.Context, id string, takeover bool) error {
	mode := leaseAcquire
	if takeover {
		mode = leaseTakeover
	}
	return p.write(ctx, "take the lease of", id, mode, func(pgx.Tx) error { return nil })
}

// Lost implements Leaser.
func (p *pgStore) Lost(id string) (*LeaseError, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	le, ok := p.lost[id]
	return le, ok
}

// Confirm implements Leaser.
func (p *pgStore) Confirm(ctx context.Context, id string) error {
	p.mu.Lock()
	epoch, held := p.held[id]
	lost := p.lost[id]
	p.mu.Unlock()
	if lost != nil {
		return lost
	}
	if !held {
		return nil
	}
	var lr leaseRow
	err := p.pool.QueryRow(ctx, "SELECT "+leaseColumns+" FROM acp_sidecar.sessions WHERE client_id = $1", id).Scan(lr.dest()...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // deleted: its next write finds the tombstone
	case err != nil:
		return pgErr(err)
	case lr.held(p.me.Instance) && lr.epoch == epoch:
		return nil
	}
	le := lr.err(id, true)
	p.mu.Lock()
	if p.held[id] == epoch {
		delete(p.held, id)
		p.lost[id] = le
	}
	p.mu.Unlock()
	p.log.Warn("lost a session's lease to another sidecar; it is no longer written here", "session", id, "holder", le.Holder.String())
	return le
}

// Sharing implements Leaser: a write that returned has committed, so only
// a lost lease keeps a session from being shared.
func (p *pgStore) Sharing(id string) (bool, string) {
	if le, lost := p.Lost(id); lost {
		return false, le.Error()
	}
	return true, ""
}

// renewal renews the leases this store holds every third of their ttl,
// until Close.
func (p *pgStore) renewal() {
	defer p.wg.Done()
	t := time.NewTicker(p.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.ttl/3)
		if err := p.renew(ctx); err != nil {
			// The leases stay this store's until another takes them; a
			// write after that finds out under the row's lock.
			p.log.Warn("renew the leases", "err", err)
		}
		cancel()
	}
}

// renew extends every lease this store holds at its epoch, and notes the
// ones another took meanwhile as lost.
func (p *pgStore) renew(ctx context.Context) error {
	p.mu.Lock()
	ids := make([]string, 0, len(p.held))
	epochs := make([]int64, 0, len(p.held))
	for id, e := range p.held {
		ids, epochs = append(ids, id), append(epochs, e)
	}
	p.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	rows, err := p.pool.Query(ctx, `UPDATE acp_sidecar.sessions s SET lease_expires = now() + make_interval(secs => $3)
		FROM unnest($1::text[], $2::bigint[]) AS h(id, epoch)
		WHERE s.client_id = h.id AND s.lease_epoch = h.epoch AND s.lease_instance = $4
		RETURNING s.client_id`, ids, epochs, p.ttl.Seconds(), p.me.Instance)
	if err != nil {
		return err
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(renewed) == len(ids) {
		return nil
	}
	kept := map[string]bool{}
	for _, id := range renewed {
		kept[id] = true
	}
	var gone []string
	for _, id := range ids {
		if !kept[id] {
			gone = append(gone, id)
		}
	}
	holders, err := p.holders(ctx, gone)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, id := range gone {
		if p.held[id] != epochs[indexOf(ids, id)] {
			continue // taken again at a new epoch meanwhile
		}
		delete(p.held, id)
		if le := holders[i]; le != nil {
			p.lost[id] = le
			p.log.Warn("lost a session's lease to another sidecar; it is no longer written here", "session", id, "holder", le.Holder.String())
		}
	}
	return nil
}

func indexOf(l []string, s string) int {
	for i, v := range l {
		if v == s {
			return i
		}
	}
	return -1
}

// holders reads who holds each of ids now, as fenced lease errors (nil for
// a session that is gone: deleted).
func (p *pgStore) holders(ctx context.Context, ids []string) ([]*LeaseError, error) {
	out := make([]*LeaseError, len(ids))
	for i, id := range ids {
		var lr leaseRow
		err := p.pool.QueryRow(ctx, "SELECT "+leaseColumns+" FROM acp_sidecar.sessions WHERE client_id = $1", id).Scan(lr.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = lr.err(id, true)
	}
	return out, nil
}

func (p *pgStore) PutSession(ctx context.Context, s *Session) error {
	rec := *s
	rec.Original = nil
	recJSON, err := encode(&rec)
	if err != nil {
		return fmt.Errorf("put session %s: %w", s.ClientID, err)
	}
	var origJSON []byte
	if s.Original != nil {
		if origJSON, err = encode(s.Original); err != nil {
			return fmt.Errorf("put session %s: %w", s.ClientID, err)
		}
	}
	natives := slices.Compact(slices.Sorted(slices.Values(nativeIDs(s)))) // the history holds the current id too
	return p.write(ctx, "put session", s.ClientID, leaseWrite, func(tx pgx.Tx) error {
		if s.Original != nil {
			var stored []byte
			if err := tx.QueryRow(ctx, "SELECT original FROM acp_sidecar.sessions WHERE client_id = $1", s.ClientID).Scan(&stored); err != nil {
				return err
			}
			if stored != nil {
				var o Config
				if err := json.Unmarshal(stored, &o); err != nil {
					return fmt.Errorf("read the stored original: %w", err)
				}
				if !sameConfig(&o, s.Original) {
					return ErrOriginalExists
				}
				origJSON = nil // the stored one stays
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE acp_sidecar.sessions SET record = $2, original = coalesce(original, $3), closed = $4, updated = $5
			WHERE client_id = $1`, s.ClientID, recJSON, origJSON, s.Closed != nil, s.Updated); err != nil {
			return err
		}
		if len(natives) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO acp_sidecar.native_ids (native_id, client_id) SELECT n, $2 FROM unnest($1::text[]) AS n
				ON CONFLICT (native_id) DO UPDATE SET client_id = excluded.client_id`, natives, s.ClientID); err != nil {
				return err
			}
		}
		return nil
	})
}

func (p *pgStore) Session(ctx context.Context, id string) (*Session, error) {
	var rec, orig []byte
	err := p.pool.QueryRow(ctx, "SELECT record, original FROM acp_sidecar.sessions WHERE client_id = $1 AND record IS NOT NULL", id).Scan(&rec, &orig)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get session %s: %w", id, p.missing(ctx, id))
	}
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, pgErr(err))
	}
	s := new(Session)
	if err := json.Unmarshal(rec, s); err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	if orig != nil {
		s.Original = new(Config)
		if err := json.Unmarshal(orig, s.Original); err != nil {
			return nil, fmt.Errorf("get session %s: original: %w", id, err)
		}
	}
	return s, nil
}

// missing is the error for a session the store does not have: gone when it
// was deleted.
func (p *pgStore) missing(ctx context.Context, id string) error {
	var deleted bool
	if err := p.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM acp_sidecar.deleted_sessions WHERE client_id = $1)", id).Scan(&deleted); err != nil {
		return pgErr(err)
	}
	if deleted {
		return errGone
	}
	return ErrNotFound
}

func (p *pgStore) Sessions(ctx context.Context) ([]Summary, error) {
	rows, err := p.pool.Query(ctx, `SELECT client_id, record->'agent', coalesce(record->>'agentName', ''), coalesce(record->>'cwd', ''), coalesce(record->>'title', ''),
			turns_kept, greatest(updated, last_activity), closed, coalesce(lease_host, ''),
			coalesce(lease_instance IS NOT NULL AND lease_expires > now(), false)
		FROM acp_sidecar.sessions WHERE record IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", pgErr(err))
	}
	var out []Summary
	var agent []byte
	var at *time.Time
	var live bool
	var holder string
	var sum Summary
	_, err = pgx.ForEachRow(rows, []any{&sum.ID, &agent, &sum.AgentName, &sum.Cwd, &sum.Title, &sum.Turns, &at, &sum.Closed, &holder, &live}, func() error {
		s := sum
		if agent != nil {
			if err := json.Unmarshal(agent, &s.Agent); err != nil {
				return fmt.Errorf("session %s: agent: %w", s.ID, err)
			}
		}
		if at != nil {
			s.LastActivity = *at
		}
		s.Live = live && !s.Closed
		if live {
			s.Holder = holder
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", pgErr(err))
	}
	sortSummaries(out)
	return out, nil
}

// keptStatus says whether a turn of status counts in a listing.
func keptStatus(status string) int {
	if status == "" || TurnStatus(status) == TurnRolledBack {
		return 0
	}
	return 1
}

func (p *pgStore) PutTurn(ctx context.Context, sessionID string, t *Turn) error {
	if err := checkTurn(sessionID, t); err != nil {
		return err
	}
	recJSON, err := encode(t)
	if err != nil {
		return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, err)
	}
	var activity *time.Time
	if at := t.activity(); !at.IsZero() {
		activity = &at
	}
	if done, err := p.putTurnHeld(ctx, sessionID, t, recJSON, activity); done || err != nil {
		if err != nil {
			return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, pgErr(err))
		}
		return nil
	}
	return p.write(ctx, "put turn", sessionID, leaseWrite, func(tx pgx.Tx) error {
		var old string
		err := tx.QueryRow(ctx, "SELECT status FROM acp_sidecar.turns WHERE client_id = $1 AND idx = $2", sessionID, t.Index).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO acp_sidecar.turns (client_id, idx, status, record) VALUES ($1, $2, $3, $4)
			ON CONFLICT (client_id, idx) DO UPDATE SET status = excluded.status, record = excluded.record`,
			sessionID, t.Index, string(t.Status), recJSON); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE acp_sidecar.sessions SET turns_kept = turns_kept + $2, last_activity = greatest(last_activity, $3)
			WHERE client_id = $1`, sessionID, keptStatus(string(t.Status))-keptStatus(old), activity)
		return err
	})
}

// putTurnHeld writes a turn of a session whose lease this store holds in
// one statement, one round trip: a turn's end waits for it. It checks the
// lease under the session row's lock as fence does, and says done false,
// having written nothing, when the lease is not this store's at its epoch
// (not taken yet, lost, or the session deleted): the caller then goes the
// long way, which takes a free lease or says why not.
func (p *pgStore) putTurnHeld(ctx context.Context, sid string, t *Turn, rec []byte, activity *time.Time) (done bool, err error) {
	p.mu.Lock()
	epoch, held := p.held[sid]
	p.mu.Unlock()
	if !held {
		return false, nil
	}
	var n int
	err = p.pool.QueryRow(ctx, `WITH lease AS (
			SELECT client_id FROM acp_sidecar.sessions
			WHERE client_id = $1 AND lease_instance = $5 AND lease_epoch = $6 FOR UPDATE
		), old AS (
			SELECT status FROM acp_sidecar.turns WHERE client_id = $1 AND idx = $2
		), put AS (
			INSERT INTO acp_sidecar.turns (client_id, idx, status, record) SELECT $1, $2, $3, $4 FROM lease
			ON CONFLICT (client_id, idx) DO UPDATE SET status = excluded.status, record = excluded.record
			RETURNING 1
		), counted AS (
			UPDATE acp_sidecar.sessions SET
				turns_kept = turns_kept + (CASE WHEN $3 IN ('rolled_back', '') THEN 0 ELSE 1 END)
					- coalesce((SELECT CASE WHEN status IN ('rolled_back', '') THEN 0 ELSE 1 END FROM old), 0),
				last_activity = greatest(last_activity, $7)
			WHERE client_id IN (SELECT client_id FROM lease)
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM put) + (SELECT count(*) FROM counted)`,
		sid, t.Index, string(t.Status), rec, p.me.Instance, epoch, activity).Scan(&n)
	if err != nil {
		return false, err
	}
	return n == 2, nil
}

func (p *pgStore) Turns(ctx context.Context, sessionID string) ([]Turn, error) {
	rows, err := p.pool.Query(ctx, "SELECT status, record FROM acp_sidecar.turns WHERE client_id = $1 ORDER BY idx", sessionID)
	if err != nil {
		return nil, fmt.Errorf("list turns %s: %w", sessionID, pgErr(err))
	}
	var out []Turn
	var status string
	var rec []byte
	_, err = pgx.ForEachRow(rows, []any{&status, &rec}, func() error {
		var t Turn
		if err := json.Unmarshal(rec, &t); err != nil {
			return fmt.Errorf("turn: %w", err)
		}
		t.Status = TurnStatus(status)
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list turns %s: %w", sessionID, pgErr(err))
	}
	if len(out) == 0 {
		if err := p.missing(ctx, sessionID); errors.Is(err, ErrDeleted) || errors.Is(err, errConn) {
			return nil, fmt.Errorf("list turns %s: %w", sessionID, err)
		}
	}
	return out, nil
}

func (p *pgStore) RollBack(ctx context.Context, sessionID string, keep int) error {
	return p.write(ctx, "roll back", sessionID, leaseWrite, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE acp_sidecar.turns SET status = $3 WHERE client_id = $1 AND idx > $2 AND status <> $3`,
			sessionID, keep, string(TurnRolledBack))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE acp_sidecar.sessions SET turns_kept = turns_kept - $2 WHERE client_id = $1", sessionID, tag.RowsAffected())
		return err
	})
}

// DeleteSession removes the session's rows in one transaction (its turns
// and native ids go with it) and leaves its tombstone. The rows are gone at
// once; PostgreSQL frees their disk at the next vacuum (docs/record.md).
// It needs no lease: a sidecar that still holds one finds the tombstone at
// its next write.
func (p *pgStore) DeleteSession(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var exists bool
		err := tx.QueryRow(ctx, `SELECT record IS NOT NULL OR EXISTS (SELECT 1 FROM acp_sidecar.turns WHERE client_id = $1)
			FROM acp_sidecar.sessions WHERE client_id = $1 FOR UPDATE`, id).Scan(&exists)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if !exists {
			return p.missing(ctx, id)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM acp_sidecar.sessions WHERE client_id = $1", id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO acp_sidecar.deleted_sessions (client_id) VALUES ($1) ON CONFLICT DO NOTHING", id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, pgErr(err))
	}
	p.mu.Lock()
	delete(p.held, id)
	delete(p.lost, id)
	p.mu.Unlock()
	return nil
}

func (p *pgStore) ClientID(ctx context.Context, nativeID string) (string, error) {
	var id string
	err := p.pool.QueryRow(ctx, "SELECT client_id FROM acp_sidecar.native_ids WHERE native_id = $1", nativeID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, pgErr(err))
	}
	return id, nil
}

func (p *pgStore) PutAgent(ctx context.Context, a *AgentInfo) error {
	if err := checkAgent(a); err != nil {
		return err
	}
	rec, err := encode(a)
	if err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO acp_sidecar.agents (name, record) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET record = excluded.record`, a.Name, rec); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, pgErr(err))
	}
	return nil
}

func (p *pgStore) Agent(ctx context.Context, name string) (*AgentInfo, error) {
	var rec []byte
	err := p.pool.QueryRow(ctx, "SELECT record FROM acp_sidecar.agents WHERE name = $1", name).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get agent %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, pgErr(err))
	}
	a := new(AgentInfo)
	if err := json.Unmarshal(rec, a); err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, err)
	}
	return a, nil
}

// Flush has nothing to wait for: every write returned once it committed.
func (p *pgStore) Flush(ctx context.Context) error { return nil }

// Close stops the renewal and releases every lease this store holds, so
// that a planned drain fails over at once, then closes the connections.
func (p *pgStore) Close() error {
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	ids := make([]string, 0, len(p.held))
	for id := range p.held {
		ids = append(ids, id)
	}
	p.held = map[string]int64{}
	p.mu.Unlock()
	var err error
	if len(ids) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = p.pool.Exec(ctx, `UPDATE acp_sidecar.sessions SET lease_instance = NULL, lease_expires = now()
			WHERE client_id = ANY($1) AND lease_instance = $2`, ids, p.me.Instance)
		cancel()
		if err != nil {
			err = fmt.Errorf("release %d leases: %w", len(ids), err)
		}
	}
	p.pool.Close()
	return err
}

var (
	_ Store  = (*pgStore)(nil)
	_ Leaser = (*pgStore)(nil)
)
