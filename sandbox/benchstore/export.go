package benchstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// Whole-tenant reads of the product's tables, for the check bundle of a
// finished run (sandbox/recheck): what a scenario's tenant holds.

// TenantFacts returns every fact of a tenant, ordered by occurred_at then
// seq (the order the store reads them in).
func (s *Store) TenantFacts(ctx context.Context, tenantID string) ([]commitlayer.Fact, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, source, type, subject, external_id, occurred_at, attrs, links
		FROM facts WHERE tenant_id = $1 ORDER BY occurred_at, seq`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("facts of %s: %w", tenantID, classify(err))
	}
	facts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (commitlayer.Fact, error) {
		var (
			f       commitlayer.Fact
			subject string
			attrs   []byte
			links   []string
		)
		if err := row.Scan(&f.Seq, &f.Source, &f.Type, &subject, &f.ExternalID, &f.OccurredAt, &attrs, &links); err != nil {
			return f, err
		}
		f.Subject, f.OccurredAt = commitlayer.Subject(subject), f.OccurredAt.UTC()
		// Read as the product's store reads them (postgres.scanFact), so the
		// re-check sees the facts the verification saw.
		a, err := commitlayer.DecodeStoredAttrs(attrs)
		if err != nil {
			return f, fmt.Errorf("fact %s/%s attrs: %w", f.Source, f.ExternalID, err)
		}
		f.Attrs = a
		for _, l := range links {
			f.Links = append(f.Links, commitlayer.Subject(l))
		}
		return f, nil
	})
	if err != nil {
		return nil, fmt.Errorf("facts of %s: %w", tenantID, classify(err))
	}
	return facts, nil
}

// KeyedAction is a stored action with the idempotency key it was recorded
// under ("" when none).
type KeyedAction struct {
	commitlayer.ActionRecord
	IdempotencyKey string
}

// TenantActions returns every action of a tenant with its idempotency key,
// ordered by requested_at then id; each action is read through the
// product's store (GetAction).
func (s *Store) TenantActions(ctx context.Context, tenantID string) ([]KeyedAction, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, coalesce(idempotency_key, '') FROM actions
		WHERE tenant_id = $1 ORDER BY requested_at, id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("actions of %s: %w", tenantID, classify(err))
	}
	keyed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (KeyedAction, error) {
		var k KeyedAction
		err := row.Scan(&k.ID, &k.IdempotencyKey)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("actions of %s: %w", tenantID, classify(err))
	}
	for i := range keyed {
		rec, err := s.GetAction(ctx, tenantID, keyed[i].ID)
		if err != nil {
			return nil, fmt.Errorf("actions of %s: %w", tenantID, err)
		}
		keyed[i].ActionRecord = rec
	}
	return keyed, nil
}
