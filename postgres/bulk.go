package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/commitlayer/commitlayer"
)

// BulkLoadFacts streams facts into the tenant's store with COPY: for loading
// a tenant's history (a backfill, a benchmark's million facts) several
// times faster than InsertFacts' batches. next yields the facts one at a
// time and returns false when there are no more; the load is one
// transaction, whole or not at all, and updates source coverage as
// InsertFacts does.
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
		type cov struct {
			count int64
			last  time.Time
		}
		coverage := map[string]*cov{}
		index := 0
		var srcErr error // COPY keeps only the text of what the source failed with
		src := pgx.CopyFromFunc(func() ([]any, error) {
			f, ok, err := next()
			if err != nil || !ok {
				srcErr = err
				return nil, err
			}
			i := index
			index++
			if err := f.Validate(); err != nil {
				srcErr = fmt.Errorf("%w: facts[%d]: %w", commitlayer.ErrInvalid, i, classify(err))
				return nil, srcErr
			}
			if err := checkTimes("occurred_at", f.OccurredAt); err != nil {
				srcErr = fmt.Errorf("facts[%d]: %w", i, classify(err))
				return nil, srcErr
			}
			attrs := []byte("{}")
			if len(f.Attrs) > 0 {
				if attrs, err = json.Marshal(f.Attrs); err != nil {
					srcErr = fmt.Errorf("%w: facts[%d].attrs: %w", commitlayer.ErrInvalid, i, classify(err))
					return nil, srcErr
				}
			}
			links := make([]string, len(f.Links))
			for j, l := range f.Links {
				links[j] = string(l)
			}
			c := coverage[f.Source]
			if c == nil {
				c = &cov{}
				coverage[f.Source] = c
			}
			c.count++
			if f.OccurredAt.After(c.last) {
				c.last = f.OccurredAt
			}
			return []any{tenantID, f.Source, f.Type, string(f.Subject), f.ExternalID, f.OccurredAt,
				string(attrs), links, linkKeys(tenantID, links)}, nil
		})
		var err error
		n, err = tx.CopyFrom(ctx, pgx.Identifier{"facts"},
			[]string{"tenant_id", "source", "type", "subject", "external_id", "occurred_at", "attrs", "links", "link_keys"}, src)
		if srcErr != nil {
			return srcErr
		}
		if err != nil {
			return err
		}
		sources := make([]string, 0, len(coverage))
		for s := range coverage {
			sources = append(sources, s)
		}
		sort.Strings(sources) // row locks in source order, as insertFacts takes them
		for _, s := range sources {
			c := coverage[s]
			if _, err := tx.Exec(ctx, `INSERT INTO source_coverage AS c (tenant_id, source, fact_count, last_fact_at, last_seen_at)
				VALUES ($1, $2, $3, $4, now())
				ON CONFLICT (tenant_id, source) DO UPDATE SET
					fact_count = c.fact_count + excluded.fact_count,
					last_fact_at = greatest(c.last_fact_at, excluded.last_fact_at),
					last_seen_at = excluded.last_seen_at`, tenantID, s, c.count, c.last); err != nil {
				return err
			}
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
