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

const benchmarkColumns = `id, status, request, summary, results, markdown, log_tail, tenant_id, started_at, finished_at`

// CreateBenchmarkRun stores a new run. An empty ID gets "bench_" + random, a
// zero StartedAt the current time; an existing ID gives commitlayer.ErrConflict.
func (db *DB) CreateBenchmarkRun(ctx context.Context, r commitlayer.BenchmarkRun) (commitlayer.BenchmarkRun, error) {
	if r.ID == "" {
		r.ID = newID("bench_")
	}
	if err := validateRun(r); err != nil {
		return commitlayer.BenchmarkRun{}, fmt.Errorf("create benchmark run: %w", classify(err))
	}
	rows, err := db.pool.Query(ctx, `INSERT INTO benchmark_runs
			(id, status, request, summary, results, markdown, log_tail, tenant_id, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()), $10)
		ON CONFLICT (id) DO NOTHING
		RETURNING `+benchmarkColumns,
		r.ID, r.Status, rawOrNull(r.Request), rawOrNull(r.Summary), rawOrNull(r.Results), r.Markdown, r.LogTail,
		r.TenantID, nullTime(r.StartedAt), nullTime(r.FinishedAt))
	if err != nil {
		return commitlayer.BenchmarkRun{}, fmt.Errorf("create benchmark run: %w", classify(err))
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.BenchmarkRun{}, fmt.Errorf("create benchmark run %q: %w", r.ID, commitlayer.ErrConflict)
	}
	if err != nil {
		return commitlayer.BenchmarkRun{}, fmt.Errorf("create benchmark run: %w", classify(err))
	}
	return out, nil
}

// UpdateBenchmarkRun replaces every field of the run r.ID except StartedAt
// (a zero StartedAt keeps the stored one). commitlayer.ErrNotFound if there is none.
func (db *DB) UpdateBenchmarkRun(ctx context.Context, r commitlayer.BenchmarkRun) error {
	if err := validateRun(r); err != nil {
		return fmt.Errorf("update benchmark run %q: %w", r.ID, classify(err))
	}
	tag, err := db.pool.Exec(ctx, `UPDATE benchmark_runs SET status = $2, request = $3, summary = $4, results = $5,
			markdown = $6, log_tail = $7, tenant_id = $8, started_at = coalesce($9, started_at), finished_at = $10
		WHERE id = $1`,
		r.ID, r.Status, rawOrNull(r.Request), rawOrNull(r.Summary), rawOrNull(r.Results), r.Markdown, r.LogTail,
		r.TenantID, nullTime(r.StartedAt), nullTime(r.FinishedAt))
	if err != nil {
		return fmt.Errorf("update benchmark run %q: %w", r.ID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("update benchmark run %q: %w", r.ID, commitlayer.ErrNotFound)
	}
	return nil
}

// GetBenchmarkRun returns one run, commitlayer.ErrNotFound if there is none.
func (db *DB) GetBenchmarkRun(ctx context.Context, id string) (commitlayer.BenchmarkRun, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+benchmarkColumns+` FROM benchmark_runs WHERE id = $1`, id)
	if err != nil {
		return commitlayer.BenchmarkRun{}, fmt.Errorf("get benchmark run %q: %w", id, classify(err))
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.BenchmarkRun{}, fmt.Errorf("get benchmark run %q: %w", id, commitlayer.ErrNotFound)
	}
	if err != nil {
		return commitlayer.BenchmarkRun{}, fmt.Errorf("get benchmark run %q: %w", id, classify(err))
	}
	return r, nil
}

// ListBenchmarkRuns lists every run, newest first, with all its fields.
func (db *DB) ListBenchmarkRuns(ctx context.Context) ([]commitlayer.BenchmarkRun, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+benchmarkColumns+` FROM benchmark_runs ORDER BY started_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list benchmark runs: %w", classify(err))
	}
	rs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list benchmark runs: %w", classify(err))
	}
	return rs, nil
}

func validateRun(r commitlayer.BenchmarkRun) error {
	if r.ID == "" || r.Status == "" {
		return fmt.Errorf("%w: id and status are required", commitlayer.ErrInvalid)
	}
	if err := checkTimes("started_at", r.StartedAt, "finished_at", r.FinishedAt); err != nil {
		return err
	}
	for name, raw := range map[string]json.RawMessage{"request": r.Request, "summary": r.Summary, "results": r.Results} {
		if len(raw) > 0 && !json.Valid(raw) {
			return fmt.Errorf("%w: %s is not valid JSON", commitlayer.ErrInvalid, name)
		}
	}
	return nil
}

// rawOrNull stores an empty payload as SQL NULL.
func rawOrNull(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func scanRun(row pgx.CollectableRow) (commitlayer.BenchmarkRun, error) {
	var (
		r                         commitlayer.BenchmarkRun
		request, summary, results *string
		finished                  *time.Time
	)
	err := row.Scan(&r.ID, &r.Status, &request, &summary, &results, &r.Markdown, &r.LogTail, &r.TenantID,
		&r.StartedAt, &finished)
	r.Request, r.Summary, r.Results = rawOf(request), rawOf(summary), rawOf(results)
	r.StartedAt = r.StartedAt.UTC()
	r.FinishedAt = timeOrZero(finished)
	return r, err
}

func rawOf(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}
