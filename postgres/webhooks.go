package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

const webhookColumns = `id, tenant_id, url, events, secret, created_at, rotated_at, previous_until, disabled_at, disabled_reason`

func scanWebhook(row pgx.CollectableRow) (commitlayer.Webhook, error) {
	var w commitlayer.Webhook
	var rotated, until, disabled *time.Time
	err := row.Scan(&w.ID, &w.TenantID, &w.URL, &w.Events, &w.Secret, &w.CreatedAt, &rotated, &until, &disabled, &w.DisabledReason)
	w.CreatedAt, w.RotatedAt, w.PreviousUntil = w.CreatedAt.UTC(), timeOrZero(rotated), timeOrZero(until)
	w.DisabledAt = timeOrZero(disabled)
	return w, err
}

// CreateWebhook stores a webhook whose ID and Secret (sealed for that id) the
// caller made. A taken id is commitlayer.ErrConflict.
func (db *DB) CreateWebhook(ctx context.Context, tenantID string, w commitlayer.Webhook) (commitlayer.Webhook, error) {
	if w.ID == "" || w.URL == "" || len(w.Events) == 0 || w.Secret == "" {
		return commitlayer.Webhook{}, fmt.Errorf("create webhook: %w: id, url, events and a sealed secret are required", commitlayer.ErrInvalid)
	}
	rows, err := db.pool.Query(ctx, `INSERT INTO webhooks (tenant_id, id, url, events, secret)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING `+webhookColumns,
		tenantID, w.ID, w.URL, w.Events, w.Secret)
	if err != nil {
		return commitlayer.Webhook{}, fmt.Errorf("create webhook: %w", classify(err))
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.Webhook{}, fmt.Errorf("create webhook %q: %w", w.ID, commitlayer.ErrConflict)
	}
	if err != nil {
		return commitlayer.Webhook{}, fmt.Errorf("create webhook: %w", classify(err))
	}
	return out, nil
}

// ListWebhooks lists a tenant's webhooks, oldest first.
func (db *DB) ListWebhooks(ctx context.Context, tenantID string) ([]commitlayer.Webhook, error) {
	return queryAll(ctx, db.pool, "list webhooks", scanWebhook, `SELECT `+webhookColumns+` FROM webhooks WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
}

const hasWebhooksSQL = `SELECT EXISTS (SELECT 1 FROM webhooks WHERE tenant_id = $1 AND disabled_at IS NULL)`

// GetWebhook returns one webhook, commitlayer.ErrNotFound if the tenant
// has none by that id.
func (db *DB) GetWebhook(ctx context.Context, tenantID, id string) (commitlayer.Webhook, error) {
	return queryOne(ctx, db.pool, fmt.Sprintf("get webhook %q", id), scanWebhook,
		`SELECT `+webhookColumns+` FROM webhooks WHERE tenant_id = $1 AND id = $2`, tenantID, id)
}

// DeleteWebhook deletes a webhook and its delivery records; deliveries in flight stop.
func (db *DB) DeleteWebhook(ctx context.Context, tenantID, id string) error {
	tag, err := db.pool.Exec(ctx, `DELETE FROM webhooks WHERE tenant_id = $1 AND id = $2`, tenantID, id)
	if err != nil {
		return fmt.Errorf("delete webhook %q: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete webhook %q: %w", id, commitlayer.ErrNotFound)
	}
	return nil
}

// RotateWebhook replaces a webhook's secret with sealed at at; the old one
// keeps signing until previousUntil, and one still overlapping from an earlier
// rotation stops now: at most two secrets sign at a time.
func (db *DB) RotateWebhook(ctx context.Context, tenantID, id, sealed string, at, previousUntil time.Time) (commitlayer.Webhook, error) {
	if sealed == "" {
		return commitlayer.Webhook{}, fmt.Errorf("rotate webhook %q: %w: a sealed secret is required", id, commitlayer.ErrInvalid)
	}
	if err := checkTimes("at", at, "previous_until", previousUntil); err != nil {
		return commitlayer.Webhook{}, fmt.Errorf("rotate webhook %q: %w", id, err)
	}
	return queryOne(ctx, db.pool, fmt.Sprintf("rotate webhook %q", id), scanWebhook, `UPDATE webhooks
		SET previous_secret = secret, secret = $3, rotated_at = $4, previous_until = $5
		WHERE tenant_id = $1 AND id = $2 RETURNING `+webhookColumns, tenantID, id, sealed, at, previousUntil)
}

// PlanDeliveries records the event's delivery to every enabled subscribed
// webhook (a retry adds only those created or enabled since) and returns the
// undelivered ones, oldest webhook first.
func (db *DB) PlanDeliveries(ctx context.Context, tenantID string, d commitlayer.WebhookDelivery) ([]commitlayer.WebhookTarget, error) {
	_, err := db.pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, webhook_id, event_id, event_type, action_id, sequence)
		SELECT tenant_id, id, $2, $3, $4, $5 FROM webhooks WHERE tenant_id = $1 AND $3 = ANY (events) AND disabled_at IS NULL
		ON CONFLICT DO NOTHING`, tenantID, d.EventID, d.EventType, d.ActionID, d.Sequence)
	if err != nil {
		return nil, fmt.Errorf("plan deliveries of %s: %w", d.EventID, classify(err))
	}
	rows, err := db.pool.Query(ctx, `SELECT w.id, w.url, w.secret,
			CASE WHEN w.previous_until > now() THEN w.previous_secret ELSE '' END
		FROM webhook_deliveries d
		JOIN webhooks w ON w.tenant_id = d.tenant_id AND w.id = d.webhook_id
		WHERE d.tenant_id = $1 AND d.event_id = $2 AND d.status IN ('pending', 'failing') AND w.disabled_at IS NULL
		ORDER BY w.created_at, w.id`, tenantID, d.EventID)
	if err != nil {
		return nil, fmt.Errorf("plan deliveries of %s: %w", d.EventID, classify(err))
	}
	ts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (commitlayer.WebhookTarget, error) {
		var t commitlayer.WebhookTarget
		return t, row.Scan(&t.WebhookID, &t.URL, &t.Secret, &t.Previous)
	})
	if err != nil {
		return nil, fmt.Errorf("plan deliveries of %s: %w", d.EventID, classify(err))
	}
	return ts, nil
}

// RecordDeliveryAttempt counts an attempt of an event's delivery to a
// webhook, leaving it in state (DeliveryDelivered, DeliveryFailing or
// DeliveryFailed) with the answer's status (0 for none) and a short error.
func (db *DB) RecordDeliveryAttempt(ctx context.Context, tenantID, webhookID, eventID, state string, status int, errText string, at time.Time) error {
	var deliveredAt *time.Time
	switch state {
	case commitlayer.DeliveryDelivered:
		deliveredAt = &at
	case commitlayer.DeliveryFailing, commitlayer.DeliveryFailed:
	default:
		return fmt.Errorf("record delivery attempt of %s: %w: state %q", eventID, commitlayer.ErrInvalid, state)
	}
	_, err := db.pool.Exec(ctx, `UPDATE webhook_deliveries SET attempts = attempts + 1, status = $4, last_status = $5,
		last_error = $6, updated_at = $7, delivered_at = COALESCE(delivered_at, $8)
		WHERE tenant_id = $1 AND webhook_id = $2 AND event_id = $3`,
		tenantID, webhookID, eventID, state, status, errText, at, deliveredAt)
	if err != nil {
		return fmt.Errorf("record delivery attempt of %s: %w", eventID, classify(err))
	}
	return nil
}

// GiveUpDeliveries marks an event's deliveries still failing as DeliveryFailed,
// appending reason to their last error: its delivery window is over.
func (db *DB) GiveUpDeliveries(ctx context.Context, tenantID, eventID, reason string, at time.Time) error {
	_, err := db.pool.Exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', updated_at = $3,
			last_error = CASE WHEN last_error = '' THEN $4 ELSE last_error || '; ' || $4 END
		WHERE tenant_id = $1 AND event_id = $2 AND status IN ('pending', 'failing')`, tenantID, eventID, at, reason)
	if err != nil {
		return fmt.Errorf("give up deliveries of %s: %w", eventID, classify(err))
	}
	return nil
}

// DisableWebhook stops deliveries to a webhook at at, for reason (the first
// one is kept), and gives up its pending deliveries (DeliveryFailed).
func (db *DB) DisableWebhook(ctx context.Context, tenantID, id, reason string, at time.Time) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("disable webhook %q: %w", id, classify(err))
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tag, err := tx.Exec(ctx, `UPDATE webhooks SET disabled_at = COALESCE(disabled_at, $3),
			disabled_reason = CASE WHEN disabled_at IS NULL THEN $4 ELSE disabled_reason END
		WHERE tenant_id = $1 AND id = $2`, tenantID, id, at, reason)
	if err != nil {
		return fmt.Errorf("disable webhook %q: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("disable webhook %q: %w", id, commitlayer.ErrNotFound)
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', updated_at = $3,
			last_error = CASE WHEN last_error = '' THEN 'webhook disabled' ELSE last_error END
		WHERE tenant_id = $1 AND webhook_id = $2 AND status IN ('pending', 'failing')`, tenantID, id, at); err != nil {
		return fmt.Errorf("disable webhook %q: %w", id, classify(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("disable webhook %q: %w", id, classify(err))
	}
	return nil
}

// EnableWebhook lets deliveries to a disabled webhook start again (events
// from now on; those given up stay so) and returns it.
func (db *DB) EnableWebhook(ctx context.Context, tenantID, id string) (commitlayer.Webhook, error) {
	return queryOne(ctx, db.pool, fmt.Sprintf("enable webhook %q", id), scanWebhook, `UPDATE webhooks
		SET disabled_at = NULL, disabled_reason = ''
		WHERE tenant_id = $1 AND id = $2 RETURNING `+webhookColumns, tenantID, id)
}

// ListDeliveries lists a webhook's latest limit deliveries, newest first.
func (db *DB) ListDeliveries(ctx context.Context, tenantID, webhookID string, limit int) ([]commitlayer.WebhookDelivery, error) {
	return queryAll(ctx, db.pool, "list deliveries", func(row pgx.CollectableRow) (commitlayer.WebhookDelivery, error) {
		var d commitlayer.WebhookDelivery
		var at *time.Time
		err := row.Scan(&d.WebhookID, &d.EventID, &d.EventType, &d.ActionID, &d.Sequence, &d.Status, &d.Attempts,
			&d.LastStatus, &d.LastError, &d.CreatedAt, &d.UpdatedAt, &at)
		d.CreatedAt, d.UpdatedAt, d.DeliveredAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC(), timeOrZero(at)
		return d, err
	}, `SELECT webhook_id, event_id, event_type, action_id, sequence, status, attempts,
		last_status, last_error, created_at, updated_at, delivered_at
		FROM webhook_deliveries WHERE tenant_id = $1 AND webhook_id = $2
		ORDER BY created_at DESC, sequence DESC, event_id LIMIT $3`, tenantID, webhookID, limit)
}
