package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// MaxSpanRejections is how many span rejections a tenant keeps: the newest.
const MaxSpanRejections = 50

// RecordSpanRejections adds up to MaxSpanRejections rejections and trims the
// tenant's to the newest MaxSpanRejections, in one transaction.
func (db *DB) RecordSpanRejections(ctx context.Context, tenantID string, rs []commitlayer.SpanRejection) error {
	rs = rs[:min(len(rs), MaxSpanRejections)]
	if len(rs) == 0 {
		return nil
	}
	cols := make([][]string, 5)
	var at []any
	for _, r := range rs {
		for i, v := range []string{r.TraceID, r.SpanID, r.Tool, r.Dialect, r.Message} {
			cols[i] = append(cols[i], v)
		}
		at = append(at, r.At)
	}
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO span_rejections (tenant_id, at, trace_id, span_id, tool, dialect, message)
			SELECT $1, * FROM unnest($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])`,
			tenantID, at, cols[0], cols[1], cols[2], cols[3], cols[4]); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM span_rejections WHERE tenant_id = $1 AND id <= (
			SELECT id FROM span_rejections WHERE tenant_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, tenantID, MaxSpanRejections)
		return err
	})
	if err != nil {
		return fmt.Errorf("record span rejections: %w", classify(err))
	}
	return nil
}

// SpanRejections lists the tenant's kept span rejections, newest first.
func (db *DB) SpanRejections(ctx context.Context, tenantID string) ([]commitlayer.SpanRejection, error) {
	return queryAll(ctx, db.pool, "span rejections", func(row pgx.CollectableRow) (r commitlayer.SpanRejection, err error) {
		err = row.Scan(&r.At, &r.TraceID, &r.SpanID, &r.Tool, &r.Dialect, &r.Message)
		r.At = r.At.UTC()
		return r, err
	}, `SELECT at, trace_id, span_id, tool, dialect, message
		FROM span_rejections WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2`, tenantID, MaxSpanRejections)
}
