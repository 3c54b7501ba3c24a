package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// BenchmarkRun is one benchmark run (admin); payloads are opaque JSON.
type BenchmarkRun struct {
	ID, Status                string
	Request, Summary, Results json.RawMessage
	Markdown, LogTail         string
	TenantID                  string
	StartedAt, FinishedAt     time.Time
}

// CreateBenchmarkRun stores a new run.
func (db *DB) CreateBenchmarkRun(ctx context.Context, r BenchmarkRun) (BenchmarkRun, error) {
	return BenchmarkRun{}, errors.ErrUnsupported
}

// UpdateBenchmarkRun replaces a run's mutable fields.
func (db *DB) UpdateBenchmarkRun(ctx context.Context, r BenchmarkRun) error {
	return errors.ErrUnsupported
}

// GetBenchmarkRun returns one run.
func (db *DB) GetBenchmarkRun(ctx context.Context, id string) (BenchmarkRun, error) {
	return BenchmarkRun{}, errors.ErrUnsupported
}

// ListBenchmarkRuns lists runs, newest first.
func (db *DB) ListBenchmarkRuns(ctx context.Context) ([]BenchmarkRun, error) {
	return nil, errors.ErrUnsupported
}
