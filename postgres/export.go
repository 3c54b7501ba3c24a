package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// Whole-tenant reads, for exporting what a tenant holds (`commitlayer
// check --results` bundles a finished sandbox run's tenants with them).

// AllFacts returns every fact of a tenant, ordered by occurred_at then seq.
func (db *DB) AllFacts(ctx context.Context, tenantID string) ([]commitlayer.Fact, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+factColumns+` FROM facts WHERE tenant_id = $1
		ORDER BY occurred_at, seq`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("all facts: %w", classify(err))
	}
	facts, err := pgx.CollectRows(rows, scanFact)
	if err != nil {
		return nil, fmt.Errorf("all facts: %w", classify(err))
	}
	return facts, nil
}

// KeyedAction is a stored action with the idempotency key it was recorded
// under ("" when none).
type KeyedAction struct {
	commitlayer.ActionRecord
	IdempotencyKey string
}

// AllActions returns every action of a tenant with its idempotency key,
// ordered by requested_at then id.
func (db *DB) AllActions(ctx context.Context, tenantID string) ([]KeyedAction, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+actionColumns+`, coalesce(idempotency_key, '') FROM actions
		WHERE tenant_id = $1 ORDER BY requested_at, id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("all actions: %w", classify(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (KeyedAction, error) {
		var k KeyedAction
		rec, err := scanActionInto(row, &k.IdempotencyKey)
		k.ActionRecord = rec
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("all actions: %w", classify(err))
	}
	return out, nil
}
