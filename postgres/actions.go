package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
)

const actionColumns = `tenant_id, id, contract_id, contract_version, agent, subject, params, requested_at,
	claim_status, claim_message, trace, settles_at, watch_until, created_at,
	verification_started_at, verification_failed_at, verification_error`

// CreateAction records an action. An idempotencyKey already used for the
// tenant, or a client-given id that exists, returns the action stored
// (created = false) when requestHash matches, commitlayer.ErrConflict if not.
// An empty a.ID gets "act_" + random. Invalid actions give ErrInvalid (with a
// *commitlayer.FieldError); an unknown tenant gives ErrNotFound.
func (db *DB) CreateAction(ctx context.Context, tenantID string, a commitlayer.Action, settlesAt, watchUntil time.Time,
	idempotencyKey string, requestHash []byte) (commitlayer.ActionRecord, bool, error) {
	rec, created, err := db.createAction(ctx, tenantID, a, settlesAt, watchUntil, idempotencyKey, requestHash)
	if err != nil {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("create action %q: %w", a.ID, classify(err))
	}
	return rec, created, nil
}

func (db *DB) createAction(ctx context.Context, tenantID string, a commitlayer.Action, settlesAt, watchUntil time.Time,
	idempotencyKey string, requestHash []byte) (commitlayer.ActionRecord, bool, error) {
	if err := a.Validate(); err != nil {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("%w: %w", commitlayer.ErrInvalid, classify(err))
	}
	if err := checkTimes("requested_at", a.RequestedAt, "settles_at", settlesAt, "watch_until", watchUntil); err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	params := []byte("{}")
	if len(a.Params) > 0 {
		b, err := json.Marshal(a.Params)
		if err != nil {
			return commitlayer.ActionRecord{}, false, fmt.Errorf("%w: params: %w", commitlayer.ErrInvalid, classify(err))
		}
		params = b
	}
	var trace []byte
	if len(bytes.TrimSpace(a.Trace)) > 0 && !bytes.Equal(bytes.TrimSpace(a.Trace), []byte("null")) {
		if !json.Valid(a.Trace) {
			return commitlayer.ActionRecord{}, false, fmt.Errorf("%w: trace is not valid JSON", commitlayer.ErrInvalid)
		}
		trace = a.Trace
	}
	if a.ID == "" {
		a.ID = commitlayer.NewID("act_")
	}
	var key *string
	if idempotencyKey != "" {
		key = &idempotencyKey
	}
	// One statement, no transaction, for the common new action: ON CONFLICT
	// DO NOTHING skips a taken id or key (a concurrent insert of the same key
	// waits for the first to commit); only then is the stored one read.
	rows, err := db.pool.Query(ctx, `INSERT INTO actions (tenant_id, id, contract_id, contract_version, agent, subject,
			params, requested_at, claim_status, claim_message, trace, settles_at, watch_until,
			idempotency_key, request_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT DO NOTHING
		RETURNING `+actionColumns,
		tenantID, a.ID, a.Contract, a.ContractVersion, a.Agent, string(a.Subject), params, a.RequestedAt,
		a.Claim.Status, a.Claim.Message, trace, settlesAt, watchUntil, key, requestHash)
	if err != nil {
		return commitlayer.ActionRecord{}, false, classify(err)
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanAction)
	if err == nil {
		return rec, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.ActionRecord{}, false, classify(err)
	}
	// Conflict: the key's row is committed and visible now, or the id exists.
	if key != nil {
		existing, hash, err := actionByKey(ctx, db.pool, tenantID, *key)
		if err == nil {
			if !bytes.Equal(hash, requestHash) {
				return commitlayer.ActionRecord{}, false, fmt.Errorf("%w: idempotency key reused with another request", commitlayer.ErrConflict)
			}
			return existing, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return commitlayer.ActionRecord{}, false, err
		}
	}
	existing, hash, err := actionByID(ctx, db.pool, tenantID, a.ID)
	if err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	if !bytes.Equal(hash, requestHash) {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("%w: action id exists with another request", commitlayer.ErrConflict)
	}
	return existing, false, nil
}

func actionByKey(ctx context.Context, q querier, tenantID, key string) (commitlayer.ActionRecord, []byte, error) {
	return actionWhere(ctx, q, `tenant_id = $1 AND idempotency_key = $2`, tenantID, key)
}

func actionByID(ctx context.Context, q querier, tenantID, id string) (commitlayer.ActionRecord, []byte, error) {
	return actionWhere(ctx, q, `tenant_id = $1 AND id = $2`, tenantID, id)
}

// actionWhere returns the action matching cond and its request hash, or pgx.ErrNoRows.
func actionWhere(ctx context.Context, q querier, cond string, args ...any) (commitlayer.ActionRecord, []byte, error) {
	rows, err := q.Query(ctx, `SELECT `+actionColumns+`, request_hash FROM actions WHERE `+cond, args...)
	if err != nil {
		return commitlayer.ActionRecord{}, nil, err
	}
	var hash []byte
	rec, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (commitlayer.ActionRecord, error) {
		return scanActionInto(row, &hash)
	})
	return rec, hash, err
}

// GetAction returns one action, commitlayer.ErrNotFound if the tenant has none by that id.
func (db *DB) GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error) {
	rec, _, err := actionByID(ctx, db.pool, tenantID, actionID)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.ActionRecord{}, fmt.Errorf("get action %q: %w", actionID, commitlayer.ErrNotFound)
	}
	if err != nil {
		return commitlayer.ActionRecord{}, fmt.Errorf("get action %q: %w", actionID, classify(err))
	}
	return rec, nil
}

// priorActionsQuery is PriorActions' condition and arguments. Filters are in
// the SQL only when given: "($4 = empty OR subject = $4)" gets a generic plan
// that cannot use the subject's index.
func priorActionsQuery(tenantID, contractID, agent string, subject commitlayer.Subject, from, to time.Time, excludeID string) (string, []any) {
	cond := `tenant_id = $1 AND contract_id = $2 AND requested_at BETWEEN $3 AND $4 AND id <> $5`
	args := []any{tenantID, contractID, lowerBound(from), upperBound(to), excludeID}
	if agent != "" {
		args = append(args, agent)
		cond += fmt.Sprintf(" AND agent = $%d", len(args))
	}
	if subject != "" {
		args = append(args, string(subject))
		cond += fmt.Sprintf(" AND subject = $%d", len(args))
	}
	return cond + " ORDER BY requested_at, id", args
}

// PriorActions returns the actions of contractID by agent and on subject (each
// when not empty), requested in [from, to] (a zero end is open), except
// excludeID; ordered by requested_at then id.
func (db *DB) PriorActions(ctx context.Context, tenantID, contractID, agent string, subject commitlayer.Subject, from, to time.Time, excludeID string) ([]commitlayer.Action, error) {
	if err := checkTimes("from", from, "to", to); err != nil {
		return nil, fmt.Errorf("prior actions of %q: %w", contractID, classify(err))
	}
	cond, args := priorActionsQuery(tenantID, contractID, agent, subject, from, to, excludeID)
	acts, err := db.queryActions(ctx, cond, args...)
	if err != nil {
		return nil, fmt.Errorf("prior actions of %q: %w", contractID, classify(err))
	}
	return acts, nil
}

// ActionsOfContract returns the actions of contractID requested at or after
// since, ordered by requested_at then id.
func (db *DB) ActionsOfContract(ctx context.Context, tenantID, contractID string, since time.Time) ([]commitlayer.Action, error) {
	if err := checkTimes("since", since); err != nil {
		return nil, fmt.Errorf("actions of %q: %w", contractID, classify(err))
	}
	acts, err := db.queryActions(ctx, `tenant_id = $1 AND contract_id = $2 AND requested_at >= $3
		ORDER BY requested_at, id`, tenantID, contractID, since)
	if err != nil {
		return nil, fmt.Errorf("actions of %q: %w", contractID, classify(err))
	}
	return acts, nil
}

func (db *DB) queryActions(ctx context.Context, cond string, args ...any) ([]commitlayer.Action, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+actionColumns+` FROM actions WHERE `+cond, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanPlainAction)
}

func scanPlainAction(row pgx.CollectableRow) (commitlayer.Action, error) {
	rec, err := scanAction(row)
	return rec.Action, err
}

// watchedActionColumns are actionColumns with NULL for the trace: no one waking
// a verification reads it, and it may be kilobytes per watcher per notice.
const watchedActionColumns = `tenant_id, id, contract_id, contract_version, agent, subject, params, requested_at,
	claim_status, claim_message, NULL::jsonb, settles_at, watch_until, created_at,
	verification_started_at, verification_failed_at, verification_error`

// watchedActionsSQL is WatchedActions' query ($1 tenant, $2 subjects, $3 now).
const watchedActionsSQL = `SELECT ` + watchedActionColumns + ` FROM actions
		WHERE tenant_id = $1 AND subject = ANY($2::text[]) AND watch_until > $3
		ORDER BY requested_at, id`

// WatchedActions returns the actions on any of subjects watched after now (the
// open verifications to signal), by requested_at then id, without Trace.
func (db *DB) WatchedActions(ctx context.Context, tenantID string, subjects []commitlayer.Subject, now time.Time) ([]commitlayer.ActionRecord, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	if err := checkTimes("now", now); err != nil {
		return nil, fmt.Errorf("watched actions: %w", classify(err))
	}
	return queryAll(ctx, db.pool, "watched actions", scanAction, watchedActionsSQL, tenantID, subjectStrings(subjects), now)
}

func scanAction(row pgx.CollectableRow) (commitlayer.ActionRecord, error) { return scanActionInto(row) }

// scanActionInto scans actionColumns, then any extra columns into extra.
func scanActionInto(row pgx.CollectableRow, extra ...any) (commitlayer.ActionRecord, error) {
	var (
		r       commitlayer.ActionRecord
		subject string
		params  []byte
		trace   []byte
		started *time.Time
		failed  *time.Time
	)
	dest := append([]any{&r.TenantID, &r.ID, &r.Contract, &r.ContractVersion, &r.Agent, &subject, &params,
		&r.RequestedAt, &r.Claim.Status, &r.Claim.Message, &trace, &r.SettlesAt, &r.WatchUntil, &r.CreatedAt,
		&started, &failed, &r.VerificationError}, extra...)
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	if started != nil {
		r.VerificationStartedAt = started.UTC()
	}
	if failed != nil {
		r.VerificationFailedAt = failed.UTC()
	}
	r.Subject = commitlayer.Subject(subject)
	r.RequestedAt = r.RequestedAt.UTC()
	r.SettlesAt = r.SettlesAt.UTC()
	r.WatchUntil = r.WatchUntil.UTC()
	r.CreatedAt = r.CreatedAt.UTC()
	p, err := decodeAttrs(params)
	if err != nil {
		return r, fmt.Errorf("action %q params: %w", r.ID, classify(err))
	}
	r.Params = p
	if trace != nil {
		r.Trace = json.RawMessage(trace)
	}
	return r, nil
}
