package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// CountWatchedActions counts the tenant's actions still watched at now.
func (db *DB) CountWatchedActions(ctx context.Context, tenantID string, now time.Time) (int, error) {
	if err := checkTimes("now", now); err != nil {
		return 0, fmt.Errorf("count watched actions: %w", classify(err))
	}
	var n int
	err := db.pool.QueryRow(ctx,
		`SELECT count(*) FROM actions WHERE tenant_id = $1 AND watch_until > $2`, tenantID, now).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count watched actions: %w", classify(err))
	}
	return n, nil
}

// EndWatch ends an action's watch at at (a cancelled verification), never extending it.
func (db *DB) EndWatch(ctx context.Context, tenantID, actionID string, at time.Time) error {
	if err := checkTimes("at", at); err != nil {
		return fmt.Errorf("end watch of %s: %w", actionID, classify(err))
	}
	tag, err := db.pool.Exec(ctx,
		`UPDATE actions SET watch_until = LEAST(watch_until, $3) WHERE tenant_id = $1 AND id = $2`,
		tenantID, actionID, at)
	if err != nil {
		return fmt.Errorf("end watch of %s: %w", actionID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("end watch of %s: %w", actionID, commitlayer.ErrNotFound)
	}
	return nil
}

// linkedSubjectsSQL is LinkedSubjects' query ($1 tenant, $2 subjects, $3 link keys).
const linkedSubjectsSQL = `SELECT DISTINCT s FROM (
			SELECT unnest(links) AS s FROM facts WHERE tenant_id = $1 AND link_keys <> '{}'::text[] AND subject = ANY($2::text[])
			UNION
			SELECT subject AS s FROM facts WHERE tenant_id = $1 AND link_keys <> '{}'::text[] AND link_keys && $3::text[]
		) x WHERE NOT (s = ANY($2::text[])) ORDER BY s`

// LinkedSubjects returns, sorted, the other subjects one link hop from any of
// subjects, in either direction.
func (db *DB) LinkedSubjects(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Subject, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	subs := subjectStrings(subjects)
	return queryAll(ctx, db.pool, "linked subjects", func(row pgx.CollectableRow) (commitlayer.Subject, error) {
		var s string
		err := row.Scan(&s)
		return commitlayer.Subject(s), err
	}, linkedSubjectsSQL, tenantID, subs, linkKeys(tenantID, subs))
}
