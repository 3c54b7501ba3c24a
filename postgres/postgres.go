// Package postgres is CommitLayer's store on PostgreSQL (pgx/v5, pgxpool):
// tenants and API keys, contract versions, facts, actions, verdict history,
// connectors, source coverage and benchmark runs. Every query is scoped by
// tenant.
package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned (wrapped) when a row does not exist for the tenant.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned (wrapped) when a write collides with an existing row,
// e.g. an idempotency key reused with another body.
var ErrConflict = errors.New("conflict")

// DB is the store. It is safe for concurrent use.
type DB struct {
	pool *pgxpool.Pool
}

// Open connects a pool to databaseURL and pings it.
func Open(ctx context.Context, databaseURL string) (*DB, error) {
	return nil, errors.ErrUnsupported
}

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// Pool returns the underlying pool.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Migrate applies the embedded migrations not yet applied.
func (db *DB) Migrate(ctx context.Context) error { return errors.ErrUnsupported }

// CreateDatabaseIfMissing connects to the server's "postgres" database and
// creates the database named in databaseURL if it does not exist.
func CreateDatabaseIfMissing(ctx context.Context, databaseURL string) error {
	return errors.ErrUnsupported
}
