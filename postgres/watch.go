package postgres

import (
	"context"
	"fmt"
	"time"
)

// CountWatchedActions counts the tenant's actions whose watch has not ended
// at now: the verifications a connector poller still serves.
func (db *DB) CountWatchedActions(ctx context.Context, tenantID string, now time.Time) (int, error) {
	if err := checkTimes("now", now); err != nil {
		return 0, fmt.Errorf("count watched actions: %w", err)
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
		return fmt.Errorf("end watch of %s: %w", actionID, err)
	}
	tag, err := db.pool.Exec(ctx,
		`UPDATE actions SET watch_until = LEAST(watch_until, $3) WHERE tenant_id = $1 AND id = $2`,
		tenantID, actionID, at)
	if err != nil {
		return fmt.Errorf("end watch of %s: %w", actionID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("end watch of %s: %w", actionID, ErrNotFound)
	}
	return nil
}
