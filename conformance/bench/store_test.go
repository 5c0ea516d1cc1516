package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/state"
	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestStoreServer: the store workload measures on the server -postgres
// names, in databases of its own that it drops at the end; without one it
// says what it needs. The server here is the tests' throwaway PostgreSQL,
// which the release build does not carry.
func TestStoreServer(t *testing.T) {
	if _, err := newPGServer(""); err == nil || !strings.Contains(err.Error(), "-postgres URL") {
		t.Errorf("no -postgres: %v, want an error that names it", err)
	}
	if _, err := newPGServer("host=/tmp password=secret"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a -postgres that is no URL: %v, want an error without its password", err)
	}
	srv := pgtest.For(t, pgtest.Options{})
	ctx := context.Background()
	s, err := newPGServer(srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.CreateDB(ctx, "acks0")
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.OpenPostgres(ctx, u, state.Options{}, state.PostgresOptions{})
	if err != nil {
		t.Fatalf("open the fleet's store on %s: %v", u, err)
	}
	st.Close()
	s.dropAll(ctx)
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname LIKE 'acp_sidecar_bench_%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d of the workload's databases left (%v), want none", left, err)
	}
}
