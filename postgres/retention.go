package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// PurgeResult is what one PurgeFacts pass dropped.
type PurgeResult struct {
	Tenants int   // tenants that had facts past retention
	Deleted int64 // facts dropped
}

// purgeChunk bounds the facts one DELETE drops, so a purge never holds a
// long transaction (or a long lock) on a table that ingest writes to. Rows
// another purge (another process) has locked are skipped, not waited on.
const purgeChunk = 10000

// PurgeFacts drops the facts that occurred more than retention before now
// and that no verification can still need. Per tenant, a fact is kept when:
//   - it occurred within retention of now, or within retention before the
//     earliest request of an action still watched (watch_until after now)
//     or whose verification has not started yet: the facts its aggregate
//     limits and effect windows read;
//   - or, whatever its age, it is about such an action's subject the way
//     the pass reads them (FactsAbout): on the subject, linking it, or on a
//     subject one link hop away. An account opened years ago is the state
//     its payout is judged against.
//
// Verdicts, actions and source coverage are never touched: the verdict
// history stays whole, and a source stays connected. A retried POST of a
// dropped fact is stored again (idempotency holds within retention).
// Retention must be positive; set it above the longest settlement + watch +
// limit window of the tenant's contracts plus a margin.
func (db *DB) PurgeFacts(ctx context.Context, retention time.Duration, now time.Time) (PurgeResult, error) {
	if retention <= 0 {
		return PurgeResult{}, fmt.Errorf("purge facts: retention %s is not positive", retention)
	}
	if err := checkTimes("now", now); err != nil {
		return PurgeResult{}, fmt.Errorf("purge facts: %w", classify(err))
	}
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT tenant_id FROM facts WHERE occurred_at < $1 ORDER BY tenant_id`,
		now.Add(-retention))
	if err != nil {
		return PurgeResult{}, fmt.Errorf("purge facts: %w", classify(err))
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return PurgeResult{}, fmt.Errorf("purge facts: %w", classify(err))
	}
	var res PurgeResult
	for _, t := range tenants {
		n, err := db.purgeTenantFacts(ctx, t, retention, now)
		if err != nil {
			return res, fmt.Errorf("purge facts of %s: %w", t, classify(err))
		}
		res.Tenants++
		res.Deleted += n
	}
	return res, nil
}

// purgeTenantFacts drops one tenant's facts past retention, in chunks.
func (db *DB) purgeTenantFacts(ctx context.Context, tenantID string, retention time.Duration, now time.Time) (int64, error) {
	// What the tenant's open verifications need, computed once: the
	// earliest request among them, and the subjects their passes read.
	var (
		earliest *time.Time
		watched  []string
	)
	err := db.pool.QueryRow(ctx, `SELECT min(requested_at), coalesce(array_agg(DISTINCT subject), '{}') FROM actions
		WHERE tenant_id = $1 AND (watch_until > $2 OR verification_started_at IS NULL)`,
		tenantID, now).Scan(&earliest, &watched)
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-retention)
	if earliest != nil && earliest.Add(-retention).Before(cutoff) {
		cutoff = earliest.Add(-retention)
	}
	// A pass reads FactsAbout(subject), then FactsAbout of the subjects
	// those facts mention (forbids through a related record): keep the
	// facts on the subjects two closures away and those linking one away.
	keepSubs, keepKeys := []string{}, []string{} // never nil: NULL would keep every fact
	if len(watched) > 0 {
		near, err := db.factClosure(ctx, tenantID, watched)
		if err != nil {
			return 0, err
		}
		if keepSubs, err = db.factClosure(ctx, tenantID, near); err != nil {
			return 0, err
		}
		keepKeys = linkKeys(tenantID, near)
	}
	var total int64
	for {
		tag, err := db.pool.Exec(ctx, `DELETE FROM facts WHERE seq IN (
				SELECT seq FROM facts
				WHERE tenant_id = $1 AND occurred_at < $2
				AND NOT (subject = ANY($3::text[])) AND NOT (link_keys && $4::text[])
				LIMIT $5 FOR UPDATE SKIP LOCKED)`, tenantID, cutoff, keepSubs, keepKeys, purgeChunk)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < purgeChunk {
			return total, nil
		}
	}
}

// factClosureSQL is factClosure's query ($1 tenant, $2 subjects, $3 their
// link keys).
const factClosureSQL = `WITH d AS (
			SELECT subject, links FROM facts
			WHERE tenant_id = $1 AND link_keys <> '{}'::text[] AND (subject = ANY($2::text[]) OR link_keys && $3::text[])
		)
		SELECT ARRAY(SELECT unnest($2::text[]) UNION SELECT subject FROM d UNION SELECT unnest(links) FROM d)`

// factClosure returns subjects, plus the subjects of the facts on them or
// linking them and the links of those facts: what FactsAbout(subjects)
// reads facts on.
func (db *DB) factClosure(ctx context.Context, tenantID string, subjects []string) ([]string, error) {
	var out []string
	err := db.pool.QueryRow(ctx, factClosureSQL, tenantID, subjects, linkKeys(tenantID, subjects)).Scan(&out)
	return out, err
}

// RunFactRetention purges facts past retention every interval until ctx
// ends (the first pass right away), logging what each pass dropped.
func (db *DB) RunFactRetention(ctx context.Context, retention, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		res, err := db.PurgeFacts(ctx, retention, time.Now())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			logger.WarnContext(ctx, "fact retention", "error", err)
		case res.Deleted > 0:
			logger.InfoContext(ctx, "fact retention", "deleted", res.Deleted, "tenants", res.Tenants, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
