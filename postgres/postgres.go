// Package postgres is CommitLayer's store on PostgreSQL (pgx/v5, pgxpool):
// tenants and API keys, contract versions, facts, actions, verdict history,
// connectors, source coverage, webhooks and the outbox. Every query is
// scoped by tenant.
package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the store. It is safe for concurrent use.
type DB struct {
	pool      *pgxpool.Pool
	txs       atomic.Int64 // transactions begun (Transactions)
	metStored sync.Map     // tenant id → when a batch last met a stored fact (insertFacts)
	// the insert paths batches took (their tests read them).
	newBatches, conflictBatches, retriedBatches atomic.Int64
}

// Transactions counts the transactions this DB has begun (retries included).
func (db *DB) Transactions() int64 { return db.txs.Load() }

// Open connects a pool to databaseURL (its pgx pool parameters apply) and pings it.
func Open(ctx context.Context, databaseURL string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open database: parse url: %w", classify(err))
	}
	cfg.AfterConnect = createFactsIn
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", classify(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: ping: %w", classify(err))
	}
	return &DB{pool: pool}, nil
}

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// Pool returns the underlying pool.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Ping checks that the database answers (for health checks).
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", classify(err))
	}
	return nil
}

// Migrations are recorded by file name, never re-run, and their numbers never
// reused: the benchmark's tables live in sandbox/benchstore's migrations.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Advisory lock keys (the two-int4 form, classid = lockSpace, so they never
// collide with single-bigint locks taken by other software).
const (
	lockSpace     = 0x436c4c79 // "ClLy"
	lockMigrate   = 1
	lockContracts = 2 // objid for contracts is a hash; see PutContract
)

// Migrations are a store's embedded SQL migrations: FS's Dir/*.sql, applied in
// file-name order and recorded by name in Table, after Setup; Lock is the
// advisory lock (two int4 keys) serializing the store's migrators.
type Migrations struct {
	FS    fs.FS
	Dir   string
	Table string
	Setup string
	Lock  [2]int32
}

// ProductMigrations are the product's migrations/*.sql.
var ProductMigrations = Migrations{FS: migrationFiles, Dir: "migrations", Table: "schema_migrations", Lock: [2]int32{lockSpace, lockMigrate}}

func (m Migrations) load() (versions, statements []string, err error) {
	names, err := fs.Glob(m.FS, m.Dir+"/*.sql")
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(m.FS, n)
		if err != nil {
			return nil, nil, err
		}
		versions = append(versions, strings.TrimSuffix(path.Base(n), ".sql"))
		statements = append(statements, string(b))
	}
	return versions, statements, nil
}

// Migrate applies the product's migrations (ProductMigrations).
func (db *DB) Migrate(ctx context.Context) error { return db.MigrateWith(ctx, ProductMigrations) }

// MigrateWith applies m's unrecorded migrations, each in its own transaction
// with its record, under an advisory lock: concurrent migrators wait and then
// find the work done.
func (db *DB) MigrateWith(ctx context.Context, m Migrations) error {
	if err := db.migrate(ctx, m); err != nil {
		return fmt.Errorf("migrate %s: %w", m.Table, classify(err))
	}
	return nil
}

func (db *DB) migrate(ctx context.Context, m Migrations) (err error) {
	migs, statements, err := m.load()
	if err != nil {
		return err
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, m.Lock[0], m.Lock[1]); err != nil {
		return fmt.Errorf("take lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx is done; failing that, close the connection so
		// the lock cannot leak back into the pool.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1, $2)`, m.Lock[0], m.Lock[1]); uerr != nil {
			_ = conn.Hijack().Close(uctx)
			if err == nil {
				err = fmt.Errorf("release lock: %w", uerr)
			}
		}
	}()
	table := pgx.Identifier(strings.Split(m.Table, ".")).Sanitize()
	if _, err := conn.Exec(ctx, m.Setup+`;
		CREATE TABLE IF NOT EXISTS `+table+` (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create %s: %w", m.Table, err)
	}
	rows, err := conn.Query(ctx, `SELECT version FROM `+table)
	if err != nil {
		return fmt.Errorf("read %s: %w", m.Table, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read %s: %w", m.Table, err)
	}
	for i, v := range migs {
		if slices.Contains(versions, v) {
			continue
		}
		if err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, statements[i]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+table+` (version) VALUES ($1)`, v)
			return err
		}); err != nil {
			return fmt.Errorf("apply %s: %w", v, err)
		}
	}
	return nil
}

// CreateDatabaseIfMissing creates the database named in databaseURL (via the
// server's "postgres" database) if missing; two racing processes both succeed.
func CreateDatabaseIfMissing(ctx context.Context, databaseURL string) error {
	// Parsed as the pool does, so pool parameters are not sent as settings.
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("create database: parse url: %w", classify(err))
	}
	cfg := pcfg.ConnConfig
	name := cfg.Database
	if name == "" {
		return fmt.Errorf("create database: url names no database")
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("create database %q: connect: %w", name, classify(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("create database %q: %w", name, classify(err))
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P04" || pe.Code == "23505") {
		return nil // created meanwhile by someone else
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", name, classify(err))
	}
	return nil
}

// inTx runs fn in a transaction, retried a few times from the start on a
// deadlock or serialization failure.
func (db *DB) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		err = db.tryTx(ctx, fn)
		if !isRetryable(err) {
			return err
		}
	}
	return err
}

func (db *DB) tryTx(ctx context.Context, fn func(pgx.Tx) error) error {
	db.txs.Add(1)
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func isRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// classify wraps input errors in commitlayer.ErrInvalid, a missing foreign key
// in ErrNotFound and an unreachable database in ErrUnavailable, so callers
// answer 4xx or 503 without reading Postgres codes. Others pass unchanged.
func classify(err error) error {
	if err == nil || errors.Is(err, commitlayer.ErrInvalid) || errors.Is(err, commitlayer.ErrNotFound) ||
		errors.Is(err, commitlayer.ErrUnavailable) {
		return err
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %w", commitlayer.ErrUnavailable, err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == "23503": // foreign_key_violation
		return fmt.Errorf("%w: %w", commitlayer.ErrNotFound, err)
	case strings.HasPrefix(pe.Code, "22"), // data exception: NUL byte, bad json, time out of range
		pe.Code == "23502", pe.Code == "23514": // not null, check
		return fmt.Errorf("%w: %w", commitlayer.ErrInvalid, err)
	}
	return err
}

// isUnavailable reports a database unreachable now: no or lost connection,
// server shutting down or starting (class 08, 57P01–57P03), or a timeout.
func isUnavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomToken returns n random bytes in lower-case base32.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return idEncoding.EncodeToString(b)
}

// timeOrZero turns a nullable timestamp into a UTC time, zero for NULL.
func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// checkTimes refuses times outside years 1 to 9999 (UTC): RFC 3339 cannot write
// them and pgx would silently wrap them into other instants. Zero passes.
func checkTimes(named ...any) error {
	for i := 0; i+1 < len(named); i += 2 {
		if err := checkTime(fmt.Sprint(named[i]), named[i+1].(time.Time)); err != nil {
			return err
		}
	}
	return nil
}

// checkTime is checkTimes("name", t) without boxing t (run once per fact).
func checkTime(name string, t time.Time) error {
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: %s: year %d is outside 1 to 9999", commitlayer.ErrInvalid, name, y)
	}
	return nil
}

// lowerBound and upperBound turn a zero time into an open end of a range,
// so range queries stay plain index conditions.
func lowerBound(t time.Time) time.Time {
	if t.IsZero() {
		return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

func upperBound(t time.Time) time.Time {
	if t.IsZero() {
		return time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	}
	return t
}

// subjectStrings converts subjects for a text[] parameter.
func subjectStrings(subjects []commitlayer.Subject) []string {
	out := make([]string, len(subjects))
	for i, s := range subjects {
		out[i] = string(s)
	}
	return out
}

// queryOne scans the one row sql returns; errors are prefixed with op, and no
// row is commitlayer.ErrNotFound.
func queryOne[T any](ctx context.Context, q querier, op string, scan pgx.RowToFunc[T], sql string, args ...any) (T, error) {
	var zero T
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", op, classify(err))
	}
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return zero, fmt.Errorf("%s: %w", op, commitlayer.ErrNotFound)
	}
	if err != nil {
		return zero, fmt.Errorf("%s: %w", op, classify(err))
	}
	return v, nil
}

// queryAll scans every row sql returns; errors are prefixed with op.
func queryAll[T any](ctx context.Context, q querier, op string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, classify(err))
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, classify(err))
	}
	return out, nil
}
