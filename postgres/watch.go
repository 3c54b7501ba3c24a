package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// CountWatchedActions counts the tenant's actions whose watch has not ended
// at now: the verifications a connector poller still serves.
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

// EndWatch ends an action's watch at the given time (when its verification
// was cancelled before the watch ran out). It never extends a watch.
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

// linkedSubjectsSQL is LinkedSubjects' query ($1 tenant, $2 subjects, $3
// their link keys).
const linkedSubjectsSQL = `SELECT DISTINCT s FROM (
			SELECT unnest(links) AS s FROM facts WHERE tenant_id = $1 AND link_keys <> '{}'::text[] AND subject = ANY($2::text[])
			UNION
			SELECT subject AS s FROM facts WHERE tenant_id = $1 AND link_keys <> '{}'::text[] AND link_keys && $3::text[]
		) x WHERE NOT (s = ANY($2::text[])) ORDER BY s`

// LinkedSubjects returns the subjects linked one hop to any of subjects,
// in either direction: those named in the links of facts on them, and the
// subjects of facts whose links name them. The given subjects are left
// out; the result is sorted.
func (db *DB) LinkedSubjects(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Subject, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	subs := make([]string, len(subjects))
	for i, s := range subjects {
		subs[i] = string(s)
	}
	rows, err := db.pool.Query(ctx, linkedSubjectsSQL, tenantID, subs, linkKeys(tenantID, subs))
	if err != nil {
		return nil, fmt.Errorf("linked subjects: %w", classify(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (commitlayer.Subject, error) {
		var s string
		err := row.Scan(&s)
		return commitlayer.Subject(s), err
	})
	if err != nil {
		return nil, fmt.Errorf("linked subjects: %w", classify(err))
	}
	return out, nil
}
