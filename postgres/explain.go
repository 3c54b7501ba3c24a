package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// QueryPlan is one query of a verification's pass with the plan Postgres ran
// it with.
type QueryPlan struct {
	Name string // the store method the query belongs to
	Plan string // EXPLAIN (ANALYZE, BUFFERS) output
}

// ExplainPassQueries runs EXPLAIN (ANALYZE, BUFFERS) of the queries a pass
// and an ingest notice make for one action's subject, with the same SQL the
// store methods send: FactsAbout, LinkedSubjects, WatchedActions and
// PriorActions (the subject's later actions of its contract). It reads
// only: ANALYZE executes the queries, which are all SELECTs.
func (db *DB) ExplainPassQueries(ctx context.Context, tenantID string, subject commitlayer.Subject, contractID string, now time.Time) ([]QueryPlan, error) {
	subs := []string{string(subject)}
	keys := linkKeys(tenantID, subs)
	priorCond, priorArgs := priorActionsQuery(tenantID, contractID, "", subject, time.Time{}, time.Time{}, "")
	queries := []struct {
		name, sql string
		args      []any
	}{
		{"FactsAbout", factsAboutSQL, []any{tenantID, subs, keys}},
		{"LinkedSubjects", linkedSubjectsSQL, []any{tenantID, subs, keys}},
		{"WatchedActions", watchedActionsSQL, []any{tenantID, subs, now}},
		{"PriorActions", `SELECT ` + actionColumns + ` FROM actions WHERE ` + priorCond, priorArgs},
	}
	var out []QueryPlan
	for _, q := range queries {
		rows, err := db.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q.sql, q.args...)
		if err != nil {
			return nil, fmt.Errorf("explain %s: %w", q.name, classify(err))
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				rows.Close()
				return nil, fmt.Errorf("explain %s: %w", q.name, classify(err))
			}
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("explain %s: %w", q.name, classify(err))
		}
		out = append(out, QueryPlan{Name: q.name, Plan: strings.Join(lines, "\n")})
	}
	return out, nil
}
