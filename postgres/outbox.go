package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// notifyGrace is how long a new notification is left to the process that
// wrote it (which delivers it at once) before a deliverer may claim it.
const notifyGrace = 5 * time.Second

// enqueueNotification writes the notice of new facts on subjects in the
// transaction that stored them and returns its id (0 when there is nothing
// to tell).
func enqueueNotification(ctx context.Context, tx pgx.Tx, tenantID string, subjects []commitlayer.Subject, exceptActionID string) (int64, error) {
	if len(subjects) == 0 {
		return 0, nil
	}
	subs := make([]string, len(subjects))
	for i, s := range subjects {
		subs[i] = string(s)
	}
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO fact_notifications (tenant_id, subjects, except_action_id, next_attempt_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4)) RETURNING id`,
		tenantID, subs, exceptActionID, notifyGrace.Seconds()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("enqueue notification: %w", classify(err))
	}
	return id, nil
}

// NotificationDelivered deletes a delivered notification. Deleting one
// that is gone (another process delivered it) is no error.
func (db *DB) NotificationDelivered(ctx context.Context, id int64) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM fact_notifications WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete notification %d: %w", id, classify(err))
	}
	return nil
}

// DeliverNotifications claims up to limit notifications that are due (in
// order), calls deliver for each, deletes those delivered and puts the
// failed one back with backoff (1 s doubling to 1 min) and the error; after
// a failure the round stops, leaving the rest due (a Temporal that hangs
// holds the transaction for one delivery's timeout, not the batch's). Rows are
// locked while delivered (FOR UPDATE SKIP LOCKED), so several processes may
// deliver at once without doubling work. It returns how many it delivered
// and how many failed.
func (db *DB) DeliverNotifications(ctx context.Context, limit int, deliver func(context.Context, commitlayer.FactNotification) error) (delivered, failed int, err error) {
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		delivered, failed = 0, 0
		rows, err := tx.Query(ctx, `SELECT id, tenant_id, subjects, except_action_id, attempts, created_at
			FROM fact_notifications WHERE next_attempt_at <= now()
			ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (commitlayer.FactNotification, error) {
			var n commitlayer.FactNotification
			var subs []string
			err := row.Scan(&n.ID, &n.TenantID, &subs, &n.ExceptActionID, &n.Attempts, &n.CreatedAt)
			for _, s := range subs {
				n.Subjects = append(n.Subjects, commitlayer.Subject(s))
			}
			return n, err
		})
		if err != nil {
			return err
		}
		for i, n := range due {
			if i > 0 && failed > 0 {
				break // Temporal is away: the rest stay due for the next round
			}
			if derr := deliver(ctx, n); derr != nil {
				failed++
				backoff := time.Second << min(n.Attempts, 6)
				if _, err := tx.Exec(ctx, `UPDATE fact_notifications SET attempts = attempts + 1,
					next_attempt_at = now() + make_interval(secs => $2), last_error = $3 WHERE id = $1`,
					n.ID, min(backoff, time.Minute).Seconds(), truncateText(derr.Error(), 500)); err != nil {
					return err
				}
				continue
			}
			delivered++
			if _, err := tx.Exec(ctx, `DELETE FROM fact_notifications WHERE id = $1`, n.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return delivered, failed, fmt.Errorf("deliver notifications: %w", classify(err))
	}
	return delivered, failed, nil
}

// PendingNotifications counts the tenant's notifications not yet delivered.
func (db *DB) PendingNotifications(ctx context.Context, tenantID string) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM fact_notifications WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count notifications: %w", classify(err))
	}
	return n, nil
}

// VerificationStarted marks an action's verification as started.
func (db *DB) VerificationStarted(ctx context.Context, tenantID, actionID string) error {
	_, err := db.pool.Exec(ctx, `UPDATE actions SET verification_started_at = now()
		WHERE tenant_id = $1 AND id = $2 AND verification_started_at IS NULL`, tenantID, actionID)
	if err != nil {
		return fmt.Errorf("mark verification of %q started: %w", actionID, classify(err))
	}
	return nil
}

// PendingStarts lists up to limit actions recorded at least olderThan ago
// whose verification was never marked started, oldest first.
func (db *DB) PendingStarts(ctx context.Context, olderThan time.Duration, limit int) ([]commitlayer.ActionRecord, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+actionColumns+` FROM actions
		WHERE verification_started_at IS NULL AND created_at <= now() - make_interval(secs => $1)
		ORDER BY created_at LIMIT $2`, olderThan.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("pending starts: %w", classify(err))
	}
	recs, err := pgx.CollectRows(rows, scanAction)
	if err != nil {
		return nil, fmt.Errorf("pending starts: %w", classify(err))
	}
	return recs, nil
}

// Identity names this database (a random id written by the migrations),
// so a worker can check that it reads the database the API writes.
func (db *DB) Identity(ctx context.Context) (string, error) {
	var id string
	err := db.pool.QueryRow(ctx, `SELECT id FROM store_identity`).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("store identity: %w", commitlayer.ErrNotFound)
	} else if err != nil {
		return "", fmt.Errorf("store identity: %w", classify(err))
	}
	return id, nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
