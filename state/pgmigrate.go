package state

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgSchemaFiles are the schema's versioned migrations, NNNN_name.sql, each
// applied once, in order. A released file never changes; a change to the
// schema is a new file.
//
//go:embed pgschema/*.sql
var pgSchemaFiles embed.FS

// pgMigrateLock is the advisory lock every sidecar takes to migrate, so
// that a fleet starting at once migrates once: the first applies what is
// missing, the others wait for its commit and find nothing left to do.
const pgMigrateLock = 0x6163705f73636d61 // "acp_scma"

// pgMigration is one versioned file of the schema.
type pgMigration struct {
	version int
	name    string
	sql     string
}

// pgMigrations reads the embedded migrations in version order.
func pgMigrations() ([]pgMigration, error) {
	entries, err := fs.ReadDir(pgSchemaFiles, "pgschema")
	if err != nil {
		return nil, fmt.Errorf("read the embedded schema: %w", err)
	}
	var out []pgMigration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != len(out)+1 {
			return nil, fmt.Errorf("embedded schema file %s: want NNNN_name.sql numbered from 1 without gaps", e.Name())
		}
		b, err := pgSchemaFiles.ReadFile(path.Join("pgschema", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read the embedded schema: %w", err)
		}
		out = append(out, pgMigration{version: v, name: e.Name(), sql: string(b)})
	}
	return out, nil
}

// migratePostgres brings the database's schema to this binary's newest, in
// one transaction under pgMigrateLock: all of it lands or none does. A
// database migrated by a newer binary is refused (ErrNewerSchema): this one
// could misread what the newer one writes. It returns the version the
// database is at.
func migratePostgres(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	migrations, err := pgMigrations()
	if err != nil {
		return 0, err
	}
	newest := len(migrations)
	version := 0
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(pgMigrateLock)); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		// The version table is the one thing that must exist before a
		// version can be read; everything else is in the migrations.
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS acp_sidecar;
			CREATE TABLE IF NOT EXISTS acp_sidecar.schema_version (
				version integer PRIMARY KEY,
				name    text NOT NULL,
				applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create the version table: %w", err)
		}
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM acp_sidecar.schema_version").Scan(&version); err != nil {
			return fmt.Errorf("read the schema version: %w", err)
		}
		if version > newest {
			return fmt.Errorf("%w: the database's schema is version %d, and this acp-sidecar knows up to %d; upgrade acp-sidecar on this host", ErrNewerSchema, version, newest)
		}
		for _, m := range migrations[version:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO acp_sidecar.schema_version (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return fmt.Errorf("note %s as applied: %w", m.name, err)
			}
			version = m.version
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("migrate the schema: %w", err)
	}
	return version, nil
}
