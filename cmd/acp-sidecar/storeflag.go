package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// storeSpec is what --store names: the state dir's badger store shared by
// every sidecar of the host ("disk"), one in memory, or the fleet's
// PostgreSQL.
type storeSpec struct {
	kind string // "disk", "memory" or "postgres"
	// dsn is the PostgreSQL connection string as given; "" takes all of it
	// from the PG* variables and ~/.pgpass. Never printed nor logged: it
	// may hold a password (where names the database instead).
	dsn   string
	where string // the database by host and name, for messages
}

const storeUsage = "disk (badger in the state dir, shared by every sidecar of the host), memory, " +
	"or a fleet's PostgreSQL: postgres://… or postgres (the PG* variables and ~/.pgpass); docs/fleet.md"

// parseStore reads a --store value. Its error never quotes a connection
// string.
func parseStore(v string) (storeSpec, error) {
	switch {
	case v == "disk" || v == "memory":
		return storeSpec{kind: v}, nil
	case v == "postgres" || v == "postgresql":
		v = ""
	case strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://"):
	default:
		if strings.Contains(v, "://") || strings.Contains(v, "=") {
			return storeSpec{}, fmt.Errorf("--store: want disk, memory, postgres or a postgres:// URL (the value is not shown: it may hold a password)")
		}
		return storeSpec{}, fmt.Errorf("--store %q: want disk, memory, postgres or a postgres:// URL", v)
	}
	where, err := state.DescribePostgres(v)
	if err != nil {
		return storeSpec{}, fmt.Errorf("--store: %w", err)
	}
	return storeSpec{kind: "postgres", dsn: v, where: where}, nil
}

// describe names the store for messages: a state dir, or a database.
func (sp storeSpec) describe(dir string) string {
	if sp.kind == "postgres" {
		return "the fleet's store (" + sp.where + ")"
	}
	return "the state store in " + dir
}

// openPostgres opens the fleet's store. Reads of the CLI and the relay's
// writes alike go through it; only the relay takes leases, by writing.
// local, when not nil, is the host's own store (the state dir's, in
// localDir), where the relay keeps what it writes while the database is
// out of reach. host names this host in the leases ("" the system's name).
func (sp storeSpec) openPostgres(ctx context.Context, log *slog.Logger, ttl time.Duration, host string, local state.Store, localDir string) (*state.Fleet, error) {
	return state.OpenPostgres(ctx, sp.dsn, state.Options{Logger: log},
		state.PostgresOptions{Logger: log, LeaseTTL: ttl, Holder: state.ThisHolder(host), Local: local, LocalDir: localDir})
}
