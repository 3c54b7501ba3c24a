// Package benchstore is the benchmark's storage: its runs, the tenants each
// run created, and its model-driven agents' write-ahead steps, in a schema
// of their own (benchmark) in the product's database, with migrations of
// their own (benchmark.schema_migrations). The product's store
// (postgres.DB) knows nothing of them.
//
// A *Store is the product's store plus these tables: it embeds the
// *postgres.DB it was built on, so the sandbox's harness and runner use one
// value for both, and it shares that store's pool (one pool per process).
package benchstore

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/postgres"
)

// Store is the product's store with the benchmark's tables beside it. It
// is safe for concurrent use.
type Store struct {
	*postgres.DB
	pool *pgxpool.Pool
}

// New builds the benchmark's store on the product's; call Migrate before
// use.
func New(db *postgres.DB) *Store { return &Store{DB: db, pool: db.Pool()} }

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the benchmark's, run by the product's migration runner:
// recorded in benchmark.schema_migrations, under an advisory lock of their
// own (class "ClBm"), so the two stores' migrators never wait on each
// other.
var migrations = postgres.Migrations{FS: migrationFiles, Dir: "migrations", Table: "benchmark.schema_migrations",
	Setup: "CREATE SCHEMA IF NOT EXISTS benchmark", Lock: [2]int32{0x436c426d, 1}}

// Migrate creates the benchmark schema and applies its embedded
// migrations not yet applied. Run it after the product's migrations: the
// benchmark's tables refer to its tenants.
func (s *Store) Migrate(ctx context.Context) error {
	return s.DB.MigrateWith(ctx, migrations)
}

// classify gives the benchmark's queries the product store's error kinds:
// input at fault is commitlayer.ErrInvalid, a missing tenant
// commitlayer.ErrNotFound, a database away commitlayer.ErrUnavailable.
func classify(err error) error {
	if err == nil || errors.Is(err, commitlayer.ErrInvalid) || errors.Is(err, commitlayer.ErrNotFound) ||
		errors.Is(err, commitlayer.ErrUnavailable) {
		return err
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: %w", commitlayer.ErrUnavailable, err)
		}
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			return fmt.Errorf("%w: %w", commitlayer.ErrUnavailable, err)
		}
		return err
	}
	switch {
	case pe.Code == "23503": // foreign_key_violation
		return fmt.Errorf("%w: %w", commitlayer.ErrNotFound, err)
	case strings.HasPrefix(pe.Code, "22"), pe.Code == "23502", pe.Code == "23514":
		return fmt.Errorf("%w: %w", commitlayer.ErrInvalid, err)
	case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
		return fmt.Errorf("%w: %w", commitlayer.ErrUnavailable, err)
	}
	return err
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newRunID returns "bench_" + 16 random base32 characters (80 bits).
func newRunID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "bench_" + idEncoding.EncodeToString(b)
}
