package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
)

// AppendVerdict adds v to its action's verdict history as version latest+1,
// idempotent for retried activities: when the latest says the same
// (Verdict.SameAnswer) it is returned with appended = false. An append that
// loses a version to another compares with what that one stored. An unknown
// action gives commitlayer.ErrNotFound.
func (db *DB) AppendVerdict(ctx context.Context, tenantID string, v commitlayer.Verdict) (commitlayer.Verdict, bool, error) {
	return db.appendVerdictFrom(ctx, tenantID, v, nil, 0)
}

// AppendFirstVerdict stores v as version 1 when the action has no verdict yet,
// for activities.FirstVerdict: it must never follow the verification's own (a
// provisional verdict after a final one would undo its settlement). One
// statement, under the action's row lock as AppendVerdictOver takes it.
func (db *DB) AppendFirstVerdict(ctx context.Context, tenantID string, v commitlayer.Verdict, took time.Duration) error {
	if err := checkVerdict(v); err != nil {
		return fmt.Errorf("append first verdict for %q: %w", v.ActionID, err)
	}
	v.Version = 1
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("append first verdict for %q: %w: %w", v.ActionID, commitlayer.ErrInvalid, err)
	}
	_, err = db.pool.Exec(ctx, `WITH locked AS (
			SELECT 1 FROM actions WHERE tenant_id = $1 AND id = $2 FOR UPDATE
		)
		INSERT INTO verdicts (tenant_id, action_id, version, status, provisional, body, evaluated_at, pass_us)
		SELECT $1, $2, 1, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM locked)
		ON CONFLICT DO NOTHING`,
		tenantID, v.ActionID, string(v.Status), v.Provisional, body, v.EvaluatedAt, took.Microseconds())
	if err != nil {
		return fmt.Errorf("append first verdict for %q: %w", v.ActionID, classify(err))
	}
	return nil
}

// checkVerdict refuses a verdict the store cannot keep.
func checkVerdict(v commitlayer.Verdict) error {
	if v.ActionID == "" || !v.Status.Valid() {
		return fmt.Errorf("%w: action id and a valid status are required", commitlayer.ErrInvalid)
	}
	if err := checkTimes("evaluated_at", v.EvaluatedAt, "settles_at", v.SettlesAt); err != nil {
		return classify(err)
	}
	return nil
}

// AppendVerdictOver is AppendVerdict when the caller just read latest (ReadPass;
// nil: none): the first round compares with it instead of reading again. An
// answer the same as latest is no news (appended = false) even if a version
// was stored since: the pass read its facts beside latest, a later version is
// a retried attempt's. took, the pass's time so far, is kept as pass_us.
func (db *DB) AppendVerdictOver(ctx context.Context, tenantID string, v commitlayer.Verdict, latest *commitlayer.Verdict, took time.Duration) (commitlayer.Verdict, bool, error) {
	if latest == nil {
		latest = &commitlayer.Verdict{} // version 0: the insert takes version 1
	}
	return db.appendVerdictFrom(ctx, tenantID, v, latest, took)
}

// appendVerdictFrom runs AppendVerdict's rounds; a non-nil known (Version 0:
// none) replaces the first round's read.
func (db *DB) appendVerdictFrom(ctx context.Context, tenantID string, v commitlayer.Verdict, known *commitlayer.Verdict, took time.Duration) (commitlayer.Verdict, bool, error) {
	if err := checkVerdict(v); err != nil {
		return commitlayer.Verdict{}, false, fmt.Errorf("append verdict for %q: %w", v.ActionID, err)
	}
	// Optimistic: read the latest; if it differs, insert the next version
	// under the action's row lock (the primary key refuses it when another
	// append took it first: read again). One statement when nothing changes,
	// two when the verdict does (a lock-read-insert transaction took five).
	began := time.Now()
	for range maxAppendRounds {
		var (
			latest commitlayer.Verdict
			err    error
		)
		switch {
		case known != nil && known.Version == 0:
			err = pgx.ErrNoRows
		case known != nil:
			latest = *known
		default:
			latest, err = latestVerdict(ctx, db.pool, tenantID, v.ActionID)
		}
		known = nil
		switch {
		case err == nil && latest.SameAnswer(v):
			return latest, false, nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return commitlayer.Verdict{}, false, fmt.Errorf("append verdict for %q: %w", v.ActionID, classify(err))
		}
		out := v
		out.Version = latest.Version + 1
		// A measured pass also counts the time spent here up to the insert.
		var passUS *int64
		if took > 0 {
			us := (took + time.Since(began)).Microseconds()
			passUS = &us
		}
		body, err := json.Marshal(out)
		if err != nil {
			return commitlayer.Verdict{}, false, fmt.Errorf("append verdict for %q: %w: %w", v.ActionID, commitlayer.ErrInvalid, err)
		}
		var action, inserted int
		err = db.pool.QueryRow(ctx, `WITH locked AS (
				SELECT 1 FROM actions WHERE tenant_id = $1 AND id = $2 FOR UPDATE
			), ins AS (
				INSERT INTO verdicts (tenant_id, action_id, version, status, provisional, body, evaluated_at, pass_us)
				SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM locked)
				ON CONFLICT DO NOTHING RETURNING 1
			)
			SELECT (SELECT count(*) FROM locked), (SELECT count(*) FROM ins)`,
			tenantID, v.ActionID, out.Version, string(out.Status), out.Provisional, body, out.EvaluatedAt, passUS).Scan(&action, &inserted)
		switch {
		case err != nil:
			return commitlayer.Verdict{}, false, fmt.Errorf("append verdict for %q: %w", v.ActionID, classify(err))
		case action == 0:
			return commitlayer.Verdict{}, false, fmt.Errorf("append verdict for %q: action: %w", v.ActionID, commitlayer.ErrNotFound)
		case inserted == 1:
			return out, true, nil
		}
		// Another append stored this version meanwhile: compare with it.
	}
	return commitlayer.Verdict{}, false, fmt.Errorf("append verdict for %q: %d other appends came first; retry", v.ActionID, maxAppendRounds)
}

// maxAppendRounds bounds appendVerdict's rounds (each lost one let another progress).
const maxAppendRounds = 64

// LatestVerdict returns an action's latest verdict, commitlayer.ErrNotFound if none.
func (db *DB) LatestVerdict(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	return queryOne(ctx, db.pool, fmt.Sprintf("latest verdict of %q", actionID), scanVerdict, latestVerdictSQL, tenantID, actionID)
}

const latestVerdictSQL = `SELECT version, body FROM verdicts WHERE tenant_id = $1 AND action_id = $2
		ORDER BY version DESC LIMIT 1`

// latestVerdict returns pgx.ErrNoRows when there is none.
func latestVerdict(ctx context.Context, q querier, tenantID, actionID string) (commitlayer.Verdict, error) {
	rows, err := q.Query(ctx, latestVerdictSQL, tenantID, actionID)
	if err != nil {
		return commitlayer.Verdict{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanVerdict)
}

// VerdictHistory returns every verdict of an action in version order.
func (db *DB) VerdictHistory(ctx context.Context, tenantID, actionID string) ([]commitlayer.Verdict, error) {
	rows, err := db.pool.Query(ctx, `SELECT version, body FROM verdicts WHERE tenant_id = $1 AND action_id = $2
		ORDER BY version`, tenantID, actionID)
	if err != nil {
		return nil, fmt.Errorf("verdict history of %q: %w", actionID, classify(err))
	}
	vs, err := pgx.CollectRows(rows, scanVerdict)
	if err != nil {
		return nil, fmt.Errorf("verdict history of %q: %w", actionID, classify(err))
	}
	return vs, nil
}

// VerdictHead is an action's latest verdict without its findings: enough for
// the wake screen to tell a final verdict with every source available.
type VerdictHead struct {
	Version         int
	Provisional     bool
	ContractVersion int
	Unavailable     int // unavailable sources
}

// LatestVerdictHeads returns, by action id, the head of the latest verdict of
// each of actionIDs that has one, extracted in the server to spare the
// transfer and decoding of findings.
func (db *DB) LatestVerdictHeads(ctx context.Context, tenantID string, actionIDs []string) (map[string]VerdictHead, error) {
	out := make(map[string]VerdictHead, len(actionIDs))
	if len(actionIDs) == 0 {
		return out, nil
	}
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT ON (action_id) action_id, version, provisional,
			CASE jsonb_typeof(body->'contract_version') WHEN 'number' THEN (body->>'contract_version')::integer ELSE 0 END,
			CASE jsonb_typeof(body->'unavailable_sources') WHEN 'array' THEN jsonb_array_length(body->'unavailable_sources') ELSE 0 END
		FROM verdicts
		WHERE tenant_id = $1 AND action_id = ANY($2::text[])
		ORDER BY action_id, version DESC`, tenantID, actionIDs)
	if err != nil {
		return nil, fmt.Errorf("latest verdict heads: %w", classify(err))
	}
	var (
		id string
		h  VerdictHead
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &h.Version, &h.Provisional, &h.ContractVersion, &h.Unavailable}, func() error {
		out[id] = h
		return nil
	}); err != nil {
		return nil, fmt.Errorf("latest verdict heads: %w", classify(err))
	}
	return out, nil
}

func scanVerdict(row pgx.CollectableRow) (commitlayer.Verdict, error) {
	var (
		v       commitlayer.Verdict
		version int
		body    []byte
	)
	if err := row.Scan(&version, &body); err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("decode verdict: %w", classify(err))
	}
	v.Version = version
	v.EvaluatedAt = v.EvaluatedAt.UTC()
	v.SettlesAt = v.SettlesAt.UTC()
	return v, nil
}
