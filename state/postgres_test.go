package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// twoHosts opens two stores on one new database, standing for the
// sidecars of two hosts.
func twoHosts(t *testing.T) (a, b *pgStore, dsn string) {
	t.Helper()
	dsn = postgresDSN(t)
	open := func(host string) *pgStore {
		p, err := openPostgres(t.Context(), dsn, PostgresOptions{Logger: testLogger(t), Holder: Holder{Host: host, PID: 100, Instance: host + "-instance"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeOK(t, p) })
		return p
	}
	return open("host-a"), open("host-b"), dsn
}

// expire ends session id's lease now, on the database's clock, as a host
// that stopped renewing would let it.
func expire(t *testing.T, dsn, id string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "UPDATE acp_sidecar.sessions SET lease_expires = now() - interval '1 second' WHERE client_id = $1", id); err != nil {
		t.Fatal(err)
	}
}

func leaseErr(t *testing.T, err error, want error, holder string) {
	t.Helper()
	var le *LeaseError
	if !errors.Is(err, want) || !errors.As(err, &le) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	if le.Holder.Host != holder || !strings.Contains(err.Error(), holder) {
		t.Errorf("err = %v, want it to name %s", err, holder)
	}
}

// TestLeaseKeepsOneWriter: the host that wrote a session first holds it;
// another is refused while the lease is live, takes it once it expired, and
// the first is fenced from then on, leaving the new holder's record as the
// new holder wrote it.
func TestLeaseKeepsOneWriter(t *testing.T) {
	ctx := t.Context()
	a, b, dsn := twoHosts(t)
	mustPut(t, a, sampleSession("s"))
	mustTurn(t, a, "s", sampleTurn(1, TurnCompleted))

	leaseErr(t, b.PutTurn(ctx, "s", sampleTurn(2, TurnCompleted)), ErrLeaseHeld, "host-a")
	leaseErr(t, b.Acquire(ctx, "s", false), ErrLeaseHeld, "host-a")

	expire(t, dsn, "s")
	if err := b.Acquire(ctx, "s", false); err != nil {
		t.Fatalf("Acquire after the lease expired: %v", err)
	}
	bs := sampleSession("s")
	bs.Cwd = "/on/b"
	mustPut(t, b, bs)
	mustTurn(t, b, "s", sampleTurn(2, TurnCompleted))

	// A "comes back" and writes what it had: every write is refused.
	late := sampleSession("s")
	late.Cwd = "/stale/a"
	leaseErr(t, a.PutSession(ctx, late), ErrFenced, "host-b")
	leaseErr(t, a.PutTurn(ctx, "s", sampleTurn(3, TurnCompleted)), ErrFenced, "host-b")
	leaseErr(t, a.RollBack(ctx, "s", 0), ErrFenced, "host-b")
	if le, lost := a.Lost("s"); !lost || le.Holder.Host != "host-b" {
		t.Errorf("a.Lost(s) = %v, %v, want lost to host-b", le, lost)
	}
	got, err := b.Session(ctx, "s")
	if err != nil || got.Cwd != "/on/b" {
		t.Errorf("Session(s) = %+v, %v; want host b's record", got, err)
	}
	turns, err := b.Turns(ctx, "s")
	if err != nil || len(turns) != 2 || turns[1].Status != TurnCompleted {
		t.Errorf("Turns(s) = %+v, %v; want b's two completed turns", turns, err)
	}
	epoch := leaseEpoch(t, dsn, "s")
	if epoch != 2 {
		t.Errorf("epoch = %d, want 2: taken once, then once again", epoch)
	}
}

func leaseEpoch(t *testing.T, dsn, id string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var e int64
	if err := conn.QueryRow(t.Context(), "SELECT lease_epoch FROM acp_sidecar.sessions WHERE client_id = $1", id).Scan(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestTakeoverFences: --takeover takes a live lease, and the old holder
// learns it at its next renewal, before it writes anything.
func TestTakeoverFences(t *testing.T) {
	ctx := t.Context()
	a, b, _ := twoHosts(t)
	mustPut(t, a, sampleSession("s"))
	if err := b.Acquire(ctx, "s", true); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if err := a.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if le, lost := a.Lost("s"); !lost || le.Holder.Host != "host-b" || !errors.Is(le, ErrFenced) {
		t.Fatalf("after the renewal a.Lost(s) = %v, %v, want fenced by host-b", le, lost)
	}
	leaseErr(t, a.PutSession(ctx, sampleSession("s")), ErrFenced, "host-b")
	// The client's own load on a is an acquire: refused while b's lease
	// is live, and never a silent fork.
	leaseErr(t, a.Acquire(ctx, "s", false), ErrLeaseHeld, "host-b")
}

// TestCloseReleases: a clean exit frees its leases at once, so a drained
// host's sessions fail over without waiting for the ttl.
func TestCloseReleases(t *testing.T) {
	ctx := t.Context()
	dsn := postgresDSN(t)
	a, err := openPostgres(ctx, dsn, PostgresOptions{Logger: testLogger(t), Holder: Holder{Host: "host-a", PID: 1, Instance: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, a, sampleSession("s"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := openPostgres(ctx, dsn, PostgresOptions{Logger: testLogger(t), Holder: Holder{Host: "host-b", PID: 2, Instance: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, b2)
	if err := b2.Acquire(ctx, "s", false); err != nil {
		t.Errorf("Acquire after the holder closed: %v", err)
	}
	l, err := b2.Sessions(ctx)
	if err != nil || len(l) != 1 || l[0].Holder != "host-b" || !l[0].Live {
		t.Errorf("Sessions() = %+v, %v; want s live on host-b", l, err)
	}
}

// TestRenewalExtends: a renewal moves the expiry on, on the database's
// clock, and keeps the epoch.
func TestRenewalExtends(t *testing.T) {
	ctx := t.Context()
	a, _, dsn := twoHosts(t)
	mustPut(t, a, sampleSession("s"))
	expire(t, dsn, "s")
	if err := a.renew(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var live bool
	if err := conn.QueryRow(ctx, "SELECT lease_expires > now() FROM acp_sidecar.sessions WHERE client_id = 's'").Scan(&live); err != nil {
		t.Fatal(err)
	}
	if !live {
		t.Error("the renewal did not move the expiry past now()")
	}
	if _, lost := a.Lost("s"); lost {
		t.Error("a renewal of its own lease says it was lost")
	}
	if e := leaseEpoch(t, dsn, "s"); e != 1 {
		t.Errorf("epoch = %d after a renewal, want 1", e)
	}
}

// TestMigratesOnce: sidecars that start at once on an empty database
// migrate it once, and all of them open.
func TestMigratesOnce(t *testing.T) {
	dsn := postgresDSN(t)
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			p, err := openPostgres(t.Context(), dsn, PostgresOptions{Logger: testLogger(t)})
			if err == nil {
				err = p.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), "SELECT version FROM acp_sidecar.schema_version ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	migrations, err := pgMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for _, m := range migrations {
		want = append(want, int32(m.version))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("applied versions (-want +got):\n%s", diff)
	}
}

// TestPostgresNewerSchema: a database a newer sidecar migrated is refused,
// and the error says what to do.
func TestPostgresNewerSchema(t *testing.T) {
	dsn := postgresDSN(t)
	p, err := openPostgres(t.Context(), dsn, PostgresOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, p)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "INSERT INTO acp_sidecar.schema_version (version, name) VALUES (999, '0999_future.sql')"); err != nil {
		t.Fatal(err)
	}
	_, err = openPostgres(t.Context(), dsn, PostgresOptions{Logger: testLogger(t)})
	if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "999") || !strings.Contains(err.Error(), "upgrade acp-sidecar") {
		t.Errorf("open = %v, want ErrNewerSchema naming version 999 and the way out", err)
	}
}

// TestPostgresErrorsHideThePassword: no error of the store quotes the
// connection string's password.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	const secret = "s3cret-pw"
	for _, dsn := range []string{
		fmt.Sprintf("postgres://someone:%s@/db?host=%s/nowhere&connect_timeout=5", secret, os.TempDir()),
		fmt.Sprintf("postgres://someone:%s@/db?host=/tmp&port=notanumber", secret),
		fmt.Sprintf("host=%s/nowhere user=someone password=%s dbname=db connect_timeout=5", os.TempDir(), secret),
	} {
		_, err := openPostgres(context.Background(), dsn, PostgresOptions{})
		if err == nil {
			t.Fatalf("open %q did not fail", dsn)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("open's error quotes the password: %v", err)
		}
	}
}

// TestFleetRecordsThroughAnOutage: with the database killed, writes still
// return at once and wait in memory; once it is back they land, in order,
// each once, and nothing written before is lost.
func TestFleetRecordsThroughAnOutage(t *testing.T) {
	ctx := t.Context()
	srv := pgtest.For(t, pgtest.Options{})
	f, err := OpenPostgres(ctx, srv.DSN("postgres"), Options{Logger: testLogger(t)}, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, f)
	mustPut(t, f, sampleSession("s"))
	mustTurn(t, f, "s", sampleTurn(1, TurnCompleted))
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	for i := 2; i <= 4; i++ {
		mustTurn(t, f, "s", sampleTurn(i, TurnCompleted)) // queued: the relay never waits for the database
	}
	if err := f.RollBack(ctx, "s", 3); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := f.Flush(short); err == nil {
		t.Error("Flush returned nil with the database down: the writes cannot have landed")
	}
	cancel()

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("Flush once the database is back: %v", err)
	}
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT idx, status FROM acp_sidecar.turns WHERE client_id = 's' ORDER BY idx")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Idx    int32
		Status string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{1, "completed"}, {2, "completed"}, {3, "completed"}, {4, "rolled_back"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turns in the database (-want +got):\n%s", diff)
	}
	var kept int32
	if err := conn.QueryRow(ctx, "SELECT turns_kept FROM acp_sidecar.sessions WHERE client_id = 's'").Scan(&kept); err != nil || kept != 3 {
		t.Errorf("turns_kept = %d, %v; want 3", kept, err)
	}
}

// TestFirstWriterWins: sidecars that write one new session at once make one
// holder; each of the others is refused with the holder's name, never with
// a database error, and never writes.
func TestFirstWriterWins(t *testing.T) {
	dsn := postgresDSN(t)
	const n = 10
	stores := make([]*pgStore, n)
	for i := range stores {
		p, err := openPostgres(t.Context(), dsn, PostgresOptions{Logger: testLogger(t), Holder: Holder{Host: fmt.Sprintf("host-%d", i), PID: i, Instance: fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		defer closeOK(t, p)
		stores[i] = p
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range stores {
		wg.Go(func() { errs[i] = p.PutTurn(t.Context(), "s", sampleTurn(1, TurnCompleted)) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrLeaseHeld):
			t.Errorf("a losing write failed with %v, want ErrLeaseHeld", err)
		}
	}
	if won != 1 {
		t.Errorf("%d writers won, want 1", won)
	}
}

// TestPostgresVerifyFull: sslmode=verify-full works: the store connects
// over TLS to a server whose certificate its CA signed for the name it
// dialled, and refuses a server it cannot verify.
func TestPostgresVerifyFull(t *testing.T) {
	ctx := t.Context()
	srv := pgtest.For(t, pgtest.Options{TLS: true})
	url := fmt.Sprintf("postgres://postgres@localhost:%d/postgres?sslmode=verify-full&sslrootcert=%s&connect_timeout=10", srv.Port(), srv.CAFile())
	p, err := openPostgres(ctx, url, PostgresOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open with verify-full: %v", err)
	}
	var ssl bool
	if err := p.pool.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Errorf("the connection uses TLS: %v, %v; want true", ssl, err)
	}
	mustPut(t, p, sampleSession("s"))
	closeOK(t, p)

	// Another CA: the server's certificate does not verify.
	other := pgtest.For(t, pgtest.Options{TLS: true})
	wrong := fmt.Sprintf("postgres://postgres@localhost:%d/postgres?sslmode=verify-full&sslrootcert=%s&connect_timeout=10", srv.Port(), other.CAFile())
	if _, err := openPostgres(ctx, wrong, PostgresOptions{Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("open against a server another CA signed = %v, want a certificate error", err)
	}
}

// TestFleetWatch: a watcher hears of each session that changes, by id, as
// the writes of another host's store commit.
func TestFleetWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dsn := postgresDSN(t)
	w, err := OpenPostgres(ctx, dsn, Options{Logger: testLogger(t)}, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, w)
	heard := make(chan string, 100)
	listening := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- w.Watch(ctx, func() { close(listening) }, func(id string) { heard <- id })
	}()
	<-listening
	a, err := openPostgres(ctx, dsn, PostgresOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, a)
	mustPut(t, a, sampleSession("s1"))
	mustTurn(t, a, "s2", sampleTurn(1, TurnCompleted))
	if err := a.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		select {
		case id := <-heard:
			got = append(got, id)
		case <-ctx.Done():
			t.Fatalf("heard %q, want s1, s2, s1", got)
		}
	}
	if want := []string{"s1", "s2", "s1"}; !slices.Equal(got, want) {
		t.Errorf("heard %q, want %q", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch ended with %v", err)
	}
}

// TestFleetKeepsWritesThroughACrash: with the database down, a sidecar
// keeps its writes in the host's own store too, and is killed before they
// land. The next sidecar on the host replays them once the database is
// back (waiting out the dead one's lease): nothing acknowledged is lost.
func TestFleetKeepsWritesThroughACrash(t *testing.T) {
	ctx := t.Context()
	srv := pgtest.For(t, pgtest.Options{})
	dir := t.TempDir()
	open := func() (*Fleet, *Shared) {
		local, err := Open(ctx, dir, Options{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		f, err := OpenPostgres(ctx, srv.DSN("postgres"), Options{Logger: testLogger(t), CloseTimeout: 100 * time.Millisecond},
			PostgresOptions{LeaseTTL: time.Second, Local: local, LocalDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return f, local
	}
	f, local := open()
	mustPut(t, f, sampleSession("s"))
	mustTurn(t, f, "s", sampleTurn(1, TurnCompleted))
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	mustTurn(t, f, "s", sampleTurn(2, TurnCompleted))
	mustTurn(t, f, "s", sampleTurn(3, TurnCompleted))
	// The sidecar goes down with its writes unlanded: its close gives up
	// on the database, and what it kept is in the host's store.
	if err := f.Close(); err == nil {
		t.Error("Close landed the writes with the database down")
	}
	closeOK(t, local)
	if ents, _ := os.ReadDir(dir + "/" + localKeepDir); len(ents) != 1 {
		t.Fatalf("marks of kept sessions: %v, want s's", ents)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	f2, local2 := open()
	defer closeOK(t, local2)
	defer closeOK(t, f2)
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM acp_sidecar.turns WHERE client_id = 's' AND status = 'completed'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			break
		}
		if n > 3 || ctx.Err() != nil {
			t.Fatalf("the database holds %d completed turns of s, want 3", n)
		}
	}
	// Once everything landed, the mark is lifted.
	for {
		if ents, _ := os.ReadDir(dir + "/" + localKeepDir); len(ents) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the mark of the replayed session stays")
		}
		if err := f2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
