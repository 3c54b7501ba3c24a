package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// List bounds.
const (
	DefaultActionsLimit = 50   // a page's size when the filter gives none
	MaxActionsLimit     = 500  // caps a page
	MaxStatsBuckets     = 2000 // caps the buckets of one stats query's window
)

// ListActions returns one page of the tenant's actions matching f, newest
// first (requested_at, id), each with its current verdict. The keyset order
// means a page continued from Next neither repeats nor skips an action. The
// current verdict is copied onto the actions row by the verdicts trigger
// (migration 0010), so every filter is an index scan.
func (db *DB) ListActions(ctx context.Context, tenantID string, f commitlayer.ActionFilter) (commitlayer.ActionPage, error) {
	if err := checkTimes("since", f.Since, "until", f.Until); err != nil {
		return commitlayer.ActionPage{}, fmt.Errorf("list actions: %w", err)
	}
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultActionsLimit
	case limit > MaxActionsLimit:
		limit = MaxActionsLimit
	}
	var (
		conds = []string{"a.tenant_id = $1"}
		args  = []any{tenantID}
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	switch f.Status {
	case "":
	case commitlayer.VerdictPending:
		conds = append(conds, "a.verdict_status IS NULL")
	default:
		if !commitlayer.Status(f.Status).Valid() {
			return commitlayer.ActionPage{}, fmt.Errorf("list actions: %w: status %q is not PASS, FAIL, UNKNOWN or pending",
				commitlayer.ErrInvalid, f.Status)
		}
		conds = append(conds, "a.verdict_status = "+arg(f.Status))
	}
	if f.Provisional != nil {
		if *f.Provisional {
			conds = append(conds, "a.verdict_provisional")
		} else {
			conds = append(conds, "a.verdict_provisional = false")
		}
	}
	if f.Contract != "" {
		conds = append(conds, "a.contract_id = "+arg(f.Contract))
	}
	if f.Agent != "" {
		conds = append(conds, "a.agent = "+arg(f.Agent))
	}
	if f.Subject != "" {
		conds = append(conds, "a.subject = "+arg(string(f.Subject)))
	}
	if !f.Since.IsZero() {
		conds = append(conds, "a.requested_at >= "+arg(f.Since))
	}
	if !f.Until.IsZero() {
		conds = append(conds, "a.requested_at < "+arg(f.Until))
	}
	if c := f.After; c != nil {
		if err := checkTimes("cursor", c.RequestedAt); err != nil {
			return commitlayer.ActionPage{}, fmt.Errorf("list actions: %w", err)
		}
		conds = append(conds, "(a.requested_at, a.id) < ("+arg(c.RequestedAt)+", "+arg(c.ID)+")")
	}
	q := `SELECT ` + prefixed("a.", actionColumns) + `, v.version, v.body
		FROM actions a
		LEFT JOIN verdicts v ON v.tenant_id = a.tenant_id AND v.action_id = a.id AND v.version = a.verdict_version
		WHERE ` + strings.Join(conds, " AND ") + `
		ORDER BY a.requested_at DESC, a.id DESC
		LIMIT ` + arg(limit+1)
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return commitlayer.ActionPage{}, fmt.Errorf("list actions: %w", classify(err))
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (commitlayer.ActionListItem, error) {
		var (
			version *int
			body    []byte
		)
		rec, err := scanActionInto(row, &version, &body)
		if err != nil {
			return commitlayer.ActionListItem{}, err
		}
		it := commitlayer.ActionListItem{Action: rec}
		if version != nil {
			var v commitlayer.Verdict
			if err := json.Unmarshal(body, &v); err != nil {
				return it, fmt.Errorf("decode verdict of %q: %w", rec.ID, err)
			}
			v.Version = *version
			v.EvaluatedAt, v.SettlesAt = v.EvaluatedAt.UTC(), v.SettlesAt.UTC()
			it.Verdict = &v
		}
		return it, nil
	})
	if err != nil {
		return commitlayer.ActionPage{}, fmt.Errorf("list actions: %w", classify(err))
	}
	page := commitlayer.ActionPage{Actions: items}
	if len(items) > limit {
		page.Actions = items[:limit]
		last := page.Actions[limit-1].Action
		page.Next = &commitlayer.ActionCursor{RequestedAt: last.RequestedAt, ID: last.ID}
	}
	return page, nil
}

// ActionStats counts the tenant's actions requested in [q.Since, q.Until) by
// current verdict, per non-empty bucket (q.Bucket long, from q.Since), contract
// and agent, in that order. Over MaxStatsBuckets buckets is ErrInvalid.
func (db *DB) ActionStats(ctx context.Context, tenantID string, q commitlayer.StatsQuery) ([]commitlayer.StatsRow, error) {
	if err := checkTimes("since", q.Since, "until", q.Until); err != nil {
		return nil, fmt.Errorf("action stats: %w", err)
	}
	switch {
	case q.Bucket < time.Second:
		return nil, fmt.Errorf("action stats: %w: bucket must be at least 1s", commitlayer.ErrInvalid)
	case !q.Until.After(q.Since):
		return nil, fmt.Errorf("action stats: %w: until must be after since", commitlayer.ErrInvalid)
	case (q.Until.UnixMicro()-q.Since.UnixMicro())/q.Bucket.Microseconds() >= MaxStatsBuckets: // Sub saturates at 292 years
		return nil, fmt.Errorf("action stats: %w: the window holds more than %d buckets", commitlayer.ErrInvalid, MaxStatsBuckets)
	}
	rows, err := db.pool.Query(ctx, `SELECT date_bin($2::bigint * interval '1 microsecond', requested_at, $3) AS bucket,
			contract_id, agent,
			count(*) FILTER (WHERE verdict_status = 'PASS'),
			count(*) FILTER (WHERE verdict_status = 'FAIL'),
			count(*) FILTER (WHERE verdict_status = 'UNKNOWN'),
			count(*) FILTER (WHERE verdict_status IS NULL)
		FROM actions
		WHERE tenant_id = $1 AND requested_at >= $3 AND requested_at < $4
			AND ($5 = '' OR contract_id = $5) AND ($6 = '' OR agent = $6)
		GROUP BY 1, 2, 3`, tenantID, q.Bucket.Microseconds(), q.Since, q.Until, q.Contract, q.Agent)
	if err != nil {
		return nil, fmt.Errorf("action stats: %w", classify(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (commitlayer.StatsRow, error) {
		var r commitlayer.StatsRow
		err := row.Scan(&r.Start, &r.Contract, &r.Agent, &r.Counts.Pass, &r.Counts.Fail, &r.Counts.Unknown, &r.Counts.Pending)
		r.Start = r.Start.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("action stats: %w", classify(err))
	}
	// Sorted here: without ORDER BY the database hashes the groups (2× faster).
	slices.SortFunc(out, func(a, b commitlayer.StatsRow) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Contract, b.Contract), cmp.Compare(a.Agent, b.Agent))
	})
	return out, nil
}

// FactsByExternalIDs returns the facts from any of sources with any of ids (a
// finding's evidence), ordered by occurred_at then seq.
func (db *DB) FactsByExternalIDs(ctx context.Context, tenantID string, sources, ids []string) ([]commitlayer.Fact, error) {
	if len(sources) == 0 || len(ids) == 0 {
		return nil, nil
	}
	return queryAll(ctx, db.pool, "facts by external id", scanFact, `SELECT `+factColumns+` FROM facts
		WHERE tenant_id = $1 AND source = ANY($2::text[]) AND external_id = ANY($3::text[])
		ORDER BY occurred_at, seq`, tenantID, sources, ids)
}
