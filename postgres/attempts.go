package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// maxAttemptsInTrace bounds the entries attempts add to an action's trace:
// later attempts still set the claim.
const maxAttemptsInTrace = 64

// RecordAttempt records an attempt of an action's call under key: the claim
// becomes the attempt's (unless a later attempt is recorded) and entry joins
// the trace. The same key again returns the action (created false) when hash
// matches, commitlayer.ErrConflict when not or for another action.
func (db *DB) RecordAttempt(ctx context.Context, tenantID, actionID, key string, claim commitlayer.Claim,
	entry json.RawMessage, at time.Time, hash []byte) (commitlayer.ActionRecord, bool, error) {
	rec, created, err := db.recordAttempt(ctx, tenantID, actionID, key, claim, entry, at, hash)
	if err != nil {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("record attempt %q of action %q: %w", key, actionID, classify(err))
	}
	return rec, created, nil
}

func (db *DB) recordAttempt(ctx context.Context, tenantID, actionID, key string, claim commitlayer.Claim,
	entry json.RawMessage, at time.Time, hash []byte) (commitlayer.ActionRecord, bool, error) {
	if err := checkTimes("attempted_at", at); err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tag, err := tx.Exec(ctx, `INSERT INTO action_attempts (tenant_id, action_id, key, request_hash, attempted_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, key) DO NOTHING`, tenantID, actionID, key, hash, at)
	if err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	if tag.RowsAffected() == 0 {
		var of string
		var h []byte
		if err := tx.QueryRow(ctx, `SELECT action_id, request_hash FROM action_attempts WHERE tenant_id = $1 AND key = $2`,
			tenantID, key).Scan(&of, &h); err != nil {
			return commitlayer.ActionRecord{}, false, err
		}
		if of != actionID || !bytes.Equal(h, hash) {
			return commitlayer.ActionRecord{}, false, fmt.Errorf("%w: attempt key reused with another request", commitlayer.ErrConflict)
		}
		rec, _, err := actionByID(ctx, tx, tenantID, actionID)
		return rec, false, err
	}
	rows, err := tx.Query(ctx, `UPDATE actions SET
			trace = CASE WHEN trace IS NULL OR jsonb_typeof(trace) <> 'array' THEN jsonb_build_array($5::jsonb)
				WHEN jsonb_array_length(trace) < $7 THEN trace || jsonb_build_array($5::jsonb) ELSE trace END,
			claim_status = CASE WHEN latest THEN $3 ELSE claim_status END,
			claim_message = CASE WHEN latest THEN $4 ELSE claim_message END
		FROM (SELECT NOT EXISTS (SELECT 1 FROM action_attempts
			WHERE tenant_id = $1 AND action_id = $2 AND attempted_at > $6) AS latest) l
		WHERE tenant_id = $1 AND id = $2
		RETURNING `+actionColumns,
		tenantID, actionID, claim.Status, claim.Message, string(entry), at, maxAttemptsInTrace)
	if err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanAction)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.ActionRecord{}, false, commitlayer.ErrNotFound
	}
	if err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	return rec, true, tx.Commit(ctx)
}
