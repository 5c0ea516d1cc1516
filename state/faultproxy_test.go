package state

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestFleetThroughANetworkThatBreaks: between the store and PostgreSQL the
// network delays, drops every connection and goes half-open. Writes go on
// being taken at once, and once the network is back each lands once: no
// turn lost, none counted twice.
func TestFleetThroughANetworkThatBreaks(t *testing.T) {
	ctx := t.Context()
	srv := pgtest.For(t, pgtest.Options{TCP: true})
	proxy := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port()))
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=1", proxy.Port())
	f, err := OpenPostgres(ctx, dsn, Options{Logger: testLogger(t), WriteTimeout: time.Second}, PostgresOptions{LeaseCallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, f)
	mustPut(t, f, sampleSession("s"))

	n := 0
	write := func(k int) {
		for range k {
			n++
			mustTurn(t, f, "s", sampleTurn(n, TurnCompleted)) // taken at once, whatever the network does
		}
	}
	notYet := func(what string) {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := f.Flush(short); err == nil {
			t.Errorf("%s: Flush returned nil, but the writes cannot have landed", what)
		}
	}

	write(3)
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.SetMode(pgtest.Delay)
	write(3)
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("through a slow network: %v", err)
	}
	proxy.SetMode(pgtest.Drop)
	write(3)
	notYet("every connection dropped")
	proxy.SetMode(pgtest.Pass)
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("after the drop: %v", err)
	}
	proxy.SetMode(pgtest.Stall)
	write(3)
	notYet("half-open connections")
	// A prompt's lease check does not hang on a half-open connection: past
	// its bound the database counts as out of reach, and the prompt goes on.
	if err := f.Confirm(ctx, "s"); err != nil {
		t.Errorf("Confirm through half-open connections = %v, want nil: go on, not shared", err)
	}
	proxy.SetMode(pgtest.Pass)
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("after the half-open connections: %v", err)
	}

	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var count, distinct, kept int
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT idx), (SELECT turns_kept FROM acp_sidecar.sessions WHERE client_id = 's') FROM acp_sidecar.turns WHERE client_id = 's'").
		Scan(&count, &distinct, &kept); err != nil {
		t.Fatal(err)
	}
	if count != n || distinct != n || kept != n {
		t.Errorf("turns in the database = %d (%d distinct), counted %d; want %d of each", count, distinct, kept, n)
	}
	t.Logf("fleet report network: written=%d lost=%d doubled=%d miscounted=%d", n, max(0, n-distinct), count-distinct, kept-n)
}
