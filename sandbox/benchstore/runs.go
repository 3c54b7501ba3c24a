package benchstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// Run is one benchmark run (admin). Request, Summary and Results are
// opaque JSON, stored and returned byte for byte. TenantID names the tenant
// the run used; the run outlives it.
type Run struct {
	ID, Status                string
	Request, Summary, Results json.RawMessage
	Markdown, LogTail         string
	TenantID                  string
	StartedAt, FinishedAt     time.Time
}

const runColumns = `id, status, request, summary, results, markdown, log_tail, tenant_id, started_at, finished_at`

// CreateBenchmarkRun stores a new run. An empty ID gets "bench_" + random, a
// zero StartedAt the current time; an existing ID gives commitlayer.ErrConflict.
func (s *Store) CreateBenchmarkRun(ctx context.Context, r Run) (Run, error) {
	if r.ID == "" {
		r.ID = newRunID()
	}
	if err := validateRun(r); err != nil {
		return Run{}, fmt.Errorf("create benchmark run: %w", err)
	}
	rows, err := s.pool.Query(ctx, `INSERT INTO benchmark.runs
			(id, status, request, summary, results, markdown, log_tail, tenant_id, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()), $10)
		ON CONFLICT (id) DO NOTHING
		RETURNING `+runColumns,
		r.ID, r.Status, rawOrNull(r.Request), rawOrNull(r.Summary), rawOrNull(r.Results), r.Markdown, r.LogTail,
		r.TenantID, nullTime(r.StartedAt), nullTime(r.FinishedAt))
	if err != nil {
		return Run{}, fmt.Errorf("create benchmark run: %w", classify(err))
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, fmt.Errorf("create benchmark run %q: %w", r.ID, commitlayer.ErrConflict)
	}
	if err != nil {
		return Run{}, fmt.Errorf("create benchmark run: %w", classify(err))
	}
	return out, nil
}

// UpdateBenchmarkRun replaces every field of the run r.ID except StartedAt
// (a zero StartedAt keeps the stored one). commitlayer.ErrNotFound if there is none.
func (s *Store) UpdateBenchmarkRun(ctx context.Context, r Run) error {
	if err := validateRun(r); err != nil {
		return fmt.Errorf("update benchmark run %q: %w", r.ID, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE benchmark.runs SET status = $2, request = $3, summary = $4, results = $5,
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
func (s *Store) GetBenchmarkRun(ctx context.Context, id string) (Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM benchmark.runs WHERE id = $1`, id)
	if err != nil {
		return Run{}, fmt.Errorf("get benchmark run %q: %w", id, classify(err))
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, fmt.Errorf("get benchmark run %q: %w", id, commitlayer.ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("get benchmark run %q: %w", id, classify(err))
	}
	return r, nil
}

// ListBenchmarkRuns lists every run, newest first, with all its fields.
func (s *Store) ListBenchmarkRuns(ctx context.Context) ([]Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM benchmark.runs ORDER BY started_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list benchmark runs: %w", classify(err))
	}
	rs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list benchmark runs: %w", classify(err))
	}
	return rs, nil
}

func validateRun(r Run) error {
	if r.ID == "" || r.Status == "" {
		return fmt.Errorf("%w: id and status are required", commitlayer.ErrInvalid)
	}
	for name, t := range map[string]time.Time{"started_at": r.StartedAt, "finished_at": r.FinishedAt} {
		// RFC 3339 cannot write these, and pgx would wrap those beyond
		// Postgres's range into other instants.
		if y := t.UTC().Year(); y < 1 || y > 9999 {
			return fmt.Errorf("%w: %s: year %d is outside 1 to 9999", commitlayer.ErrInvalid, name, y)
		}
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

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func scanRun(row pgx.CollectableRow) (Run, error) {
	var (
		r                         Run
		request, summary, results *string
		finished                  *time.Time
	)
	err := row.Scan(&r.ID, &r.Status, &request, &summary, &results, &r.Markdown, &r.LogTail, &r.TenantID,
		&r.StartedAt, &finished)
	r.Request, r.Summary, r.Results = rawOf(request), rawOf(summary), rawOf(results)
	r.StartedAt = r.StartedAt.UTC()
	if finished != nil {
		r.FinishedAt = finished.UTC()
	}
	return r, err
}

func rawOf(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}
