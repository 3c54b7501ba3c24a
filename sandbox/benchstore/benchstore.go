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
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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

// The migrator's advisory lock: its own class id, apart from the
// product's, so the two migrators never wait on each other.
const (
	lockSpace   = 0x436c426d // "ClBm"
	lockMigrate = 1
)

// Migrate creates the benchmark schema and applies its embedded
// migrations not yet recorded in benchmark.schema_migrations, in file-name
// order, each in its own transaction, under an advisory lock (several
// processes may start at once). Run it after the product's migrations: the
// benchmark's tables refer to its tenants.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("migrate benchmark schema: %w", classify(err))
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) (err error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockSpace, lockMigrate); err != nil {
		return fmt.Errorf("take lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1, $2)`, lockSpace, lockMigrate); uerr != nil {
			_ = conn.Hijack().Close(uctx)
			if err == nil {
				err = fmt.Errorf("release lock: %w", uerr)
			}
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS benchmark;
		CREATE TABLE IF NOT EXISTS benchmark.schema_migrations (
			version text PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create benchmark.schema_migrations: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT version FROM benchmark.schema_migrations`)
	if err != nil {
		return fmt.Errorf("read benchmark.schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read benchmark.schema_migrations: %w", err)
	}
	applied := map[string]bool{}
	for _, v := range versions {
		applied[v] = true
	}
	for _, n := range names {
		version := strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".sql")
		if applied[version] {
			continue
		}
		sql, err := migrationFiles.ReadFile(n)
		if err != nil {
			return err
		}
		if err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO benchmark.schema_migrations (version) VALUES ($1)`, version)
			return err
		}); err != nil {
			return fmt.Errorf("apply %s: %w", version, err)
		}
	}
	return nil
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
