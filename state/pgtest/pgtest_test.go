//go:build unix

package pgtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
)

// query connects to dsn, asks for one row and disconnects.
func query(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// TestServerAndProxy runs a server through its life (a database of its own,
// a kill, a restart, the stop in For's cleanup) with a Proxy in front of
// it, and checks each step does what its doc says. TestMain's goleak then
// checks that nothing of it is left running.
func TestServerAndProxy(t *testing.T) {
	ctx := t.Context()
	srv := pgtest.For(t, pgtest.Options{TCP: true})
	dsn, err := srv.CreateDB(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	if err := query(ctx, dsn); err != nil {
		t.Fatalf("query on the unix socket: %v", err)
	}
	p := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port()))
	via := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/life?sslmode=disable&connect_timeout=5", p.Port())
	if err := query(ctx, via); err != nil {
		t.Fatalf("query through the proxy: %v", err)
	}
	p.SetMode(pgtest.Drop)
	if err := query(ctx, via); err == nil {
		t.Error("a query through a proxy that drops every connection succeeded")
	}
	p.SetMode(pgtest.Pass)

	srv.Kill()
	if err := query(ctx, dsn); err == nil {
		t.Error("a query on a killed server succeeded")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := query(ctx, via); err != nil {
		t.Errorf("query through the proxy after the restart: %v", err)
	}
}
