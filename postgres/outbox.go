package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// Notice is a notice of new facts to deliver to the verifications watching
// its subjects: written in the facts' transaction, deleted once delivered.
type Notice struct {
	ID             int64
	TenantID       string
	Subjects       []commitlayer.Subject
	ExceptActionID string // the verification whose pass stored the facts: not told
	// Digest digests the facts (nil: not said; every watcher is woken).
	Digest    *contracts.Digest
	Attempts  int
	CreatedAt time.Time
}

// NoticeChannel is notified at commit by a trigger on a notice's insert (Listen).
const NoticeChannel = "commitlayer_notices"

// enqueueNotice writes the notice of new facts on subjects in their transaction.
func enqueueNotice(ctx context.Context, tx pgx.Tx, tenantID string, subjects []commitlayer.Subject, except string, digest *contracts.Digest) error {
	if len(subjects) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO fact_notifications (tenant_id, subjects, except_action_id, digest)
		VALUES ($1, $2, $3, $4)`, tenantID, subjectStrings(subjects), except, digest)
	if err != nil {
		return fmt.Errorf("enqueue notice: %w", classify(err))
	}
	return nil
}

// DeliverNotifications claims up to limit due notices in order, delivers and
// deletes them; a failed one goes back with backoff (1 s doubling to 1 min) and
// ends the round, so a hanging Temporal holds the transaction for one
// delivery's timeout, not the batch's. FOR UPDATE SKIP LOCKED lets every
// process deliver at once without doubling work.
func (db *DB) DeliverNotifications(ctx context.Context, limit int, deliver func(context.Context, Notice) error) (delivered, failed int, err error) {
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		delivered, failed = 0, 0
		rows, err := tx.Query(ctx, `SELECT id, tenant_id, subjects, except_action_id, digest, attempts, created_at
			FROM fact_notifications WHERE next_attempt_at <= now()
			ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Notice, error) {
			var n Notice
			var subs []string
			err := row.Scan(&n.ID, &n.TenantID, &subs, &n.ExceptActionID, &n.Digest, &n.Attempts, &n.CreatedAt)
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
					n.ID, min(backoff, time.Minute).Seconds(), commitlayer.Clip(derr.Error(), 500)); err != nil {
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

// PendingStarts lists up to limit actions whose verification was neither
// started nor refused and is due (recorded olderThan ago, past its backoff).
// Fair across tenants: each tenant's oldest due start first, then its second…
func (db *DB) PendingStarts(ctx context.Context, olderThan time.Duration, limit int) ([]commitlayer.ActionRecord, error) {
	return queryAll(ctx, db.pool, "pending starts", scanAction, `WITH due AS (
			SELECT tenant_id, id, coalesce(next_start_at, created_at) AS due_at,
				row_number() OVER (PARTITION BY tenant_id ORDER BY coalesce(next_start_at, created_at), id) AS turn
			FROM actions
			WHERE verification_started_at IS NULL AND verification_failed_at IS NULL
				AND created_at <= now() - make_interval(secs => $1)
				AND (next_start_at IS NULL OR next_start_at <= now()))
		SELECT `+prefixed("a.", actionColumns)+` FROM actions a JOIN due USING (tenant_id, id)
		ORDER BY due.turn, due.due_at, a.tenant_id, a.id LIMIT $2`, olderThan.Seconds(), limit)
}

// StartDeferred records a failed start a later try may fix: the next waits 1 s
// doubling per attempt, at most most. It returns the attempts so far.
func (db *DB) StartDeferred(ctx context.Context, tenantID, actionID string, most time.Duration, reason string) (int, error) {
	var attempts int
	err := db.pool.QueryRow(ctx, `UPDATE actions SET start_attempts = start_attempts + 1,
			next_start_at = now() + make_interval(secs => least(power(2, least(start_attempts, 20)), $3)),
			start_error = $4
		WHERE tenant_id = $1 AND id = $2 AND verification_started_at IS NULL
		RETURNING start_attempts`, tenantID, actionID, most.Seconds(), commitlayer.Clip(reason, 500)).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil // started meanwhile (another process)
	}
	if err != nil {
		return 0, fmt.Errorf("defer start of %q: %w", actionID, classify(err))
	}
	return attempts, nil
}

// StartFailed marks an action's verification failed for good (a start no retry
// can fix) and deletes any first verdict (activities.FirstVerdict) in the same
// statement. It reports false when already started or marked.
func (db *DB) StartFailed(ctx context.Context, tenantID, actionID, reason string) (bool, error) {
	var failed int
	err := db.pool.QueryRow(ctx, `WITH failed AS (
			UPDATE actions SET verification_failed_at = now(), verification_error = $3,
				start_attempts = start_attempts + 1
			WHERE tenant_id = $1 AND id = $2 AND verification_started_at IS NULL AND verification_failed_at IS NULL
			RETURNING id
		), gone AS (
			DELETE FROM verdicts v USING failed WHERE v.tenant_id = $1 AND v.action_id = failed.id
		)
		SELECT count(*) FROM failed`,
		tenantID, actionID, commitlayer.Clip(reason, 500)).Scan(&failed)
	if err != nil {
		return false, fmt.Errorf("mark start of %q failed: %w", actionID, classify(err))
	}
	return failed == 1, nil
}

// prefixed qualifies each column of a comma-separated list with p ("a.").
func prefixed(p, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// Identity is this database's random id (migrations), so a worker can check it
// reads the database the API writes.
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

// Listen calls wake each time notices were committed, by any process, until
// ctx ends, on its own connection outside the pool; it reconnects after a
// failure and wakes then too (what was written meanwhile is due).
func (db *DB) Listen(ctx context.Context, wake func(), logger *slog.Logger) {
	cfg := db.pool.Config().ConnConfig.Copy()
	for backoff := time.Second; ctx.Err() == nil; {
		err := db.listen(ctx, cfg, wake)
		if ctx.Err() != nil {
			return
		}
		logger.Warn("listen for notices; reconnecting", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (db *DB) listen(ctx context.Context, cfg *pgx.ConnConfig, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+NoticeChannel); err != nil {
		return err
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
