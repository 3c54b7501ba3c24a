package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/commitlayer/commitlayer"
)

// bulkChunk is how many facts BulkLoadFacts stages at a time.
const bulkChunk = 10_000

// BulkLoadFacts streams facts into the tenant's store with COPY, bulkChunk
// at a time as InsertFacts stores a new batch (copyNewFacts): for loading
// a tenant's history (a backfill, a benchmark's million facts) in one
// transaction, whole or not at all, updating source coverage as
// InsertFacts does. next yields the facts one at a time and returns false
// when there are no more.
//
// Unlike InsertFacts it is not idempotent: a fact whose (source,
// external_id) the tenant already holds, or that the stream repeats, fails
// the whole load with commitlayer.ErrConflict. It tells no verification
// about the facts (load before recording the actions that watch them). An
// invalid fact fails the load with commitlayer.ErrInvalid naming its index.
// It returns how many facts were stored.
func (db *DB) BulkLoadFacts(ctx context.Context, tenantID string, next func() (commitlayer.Fact, bool, error)) (int64, error) {
	var n int64
	err := db.tryTx(ctx, func(tx pgx.Tx) error {
		if err := lockTenant(ctx, tx, tenantID); err != nil {
			return err
		}
		chunk := make([]commitlayer.Fact, 0, bulkChunk)
		for first, done := 0, false; !done; first += len(chunk) {
			chunk = chunk[:0]
			for len(chunk) < bulkChunk && !done {
				f, ok, err := next()
				if err != nil {
					return err
				}
				if done = !ok; ok {
					chunk = append(chunk, f)
				}
			}
			rows, err := encodeFacts(chunk, first)
			switch {
			case err != nil:
				return err
			case len(rows) < len(chunk):
				return fmt.Errorf("%w: the stream repeats a fact", commitlayer.ErrConflict)
			case len(rows) == 0:
				continue
			}
			if rows, err = numberFacts(ctx, tx, rows); err != nil {
				return err
			}
			if _, err := copyNewFacts(ctx, tx, tenantID, rows); err != nil {
				return err
			}
			n += int64(len(rows))
		}
		return nil
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation: a fact already stored
		return 0, fmt.Errorf("bulk load facts: %w: %w", commitlayer.ErrConflict, err)
	}
	if err != nil {
		return 0, fmt.Errorf("bulk load facts: %w", classify(err))
	}
	return n, nil
}
