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

// purgeChunk bounds the facts one DELETE drops, so a purge never holds a long
// transaction or lock on a table ingest writes to.
const purgeChunk = 10000

// PurgeFacts drops the facts older than retention that no verification can
// still need. A fact is kept when it occurred within retention of now or of the
// earliest request of an action still watched or not started (its limit and
// effect windows), or, whatever its age, when the pass reads it for such an
// action's subject (FactsAbout): an account opened years ago is the state its
// payout is judged against.
//
// Verdicts, actions and coverage are never touched. A retried POST of a dropped
// fact is stored again (idempotency holds within retention). Retention must be
// positive, above the longest settlement + watch + limit window plus a margin.
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
	// The open verifications' earliest request and subjects, computed once.
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

// factClosureSQL is factClosure's query ($1 tenant, $2 subjects, $3 link keys).
const factClosureSQL = `WITH d AS (
			SELECT subject, links FROM facts
			WHERE tenant_id = $1 AND link_keys <> '{}'::text[] AND (subject = ANY($2::text[]) OR link_keys && $3::text[])
		)
		SELECT ARRAY(SELECT unnest($2::text[]) UNION SELECT subject FROM d UNION SELECT unnest(links) FROM d)`

// factClosure returns the subjects FactsAbout(subjects) reads facts on.
func (db *DB) factClosure(ctx context.Context, tenantID string, subjects []string) ([]string, error) {
	var out []string
	err := db.pool.QueryRow(ctx, factClosureSQL, tenantID, subjects, linkKeys(tenantID, subjects)).Scan(&out)
	return out, err
}

// RunFactRetention purges facts past retention now and every interval until ctx ends.
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
