package benchstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// CreateBenchmarkTenant creates the tenant a benchmark run uses for one of
// its scenarios (named "benchmark <run> <scenario>", through the product's
// CreateTenant) and marks it as the run's in benchmark.run_tenants, so
// PurgeBenchmarkTenants finds it by that row, never by its name. When the
// mark cannot be written the tenant is deleted again: no unmarked
// benchmark tenant is left behind.
func (s *Store) CreateBenchmarkTenant(ctx context.Context, runID, scenarioID string) (commitlayer.Tenant, string, error) {
	if runID == "" {
		return commitlayer.Tenant{}, "", fmt.Errorf("create benchmark tenant: %w: run id is required", commitlayer.ErrInvalid)
	}
	t, key, err := s.CreateTenant(ctx, "benchmark "+runID+" "+scenarioID)
	if err != nil {
		return commitlayer.Tenant{}, "", fmt.Errorf("create benchmark tenant: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO benchmark.run_tenants (run_id, tenant_id) VALUES ($1, $2)`, runID, t.ID); err != nil {
		if derr := s.DeleteTenant(context.WithoutCancel(ctx), t.ID); derr != nil {
			return commitlayer.Tenant{}, "", fmt.Errorf("create benchmark tenant: mark it as run %s's: %w (and delete it: %w)", runID, classify(err), derr)
		}
		return commitlayer.Tenant{}, "", fmt.Errorf("create benchmark tenant: mark it as run %s's: %w", runID, classify(err))
	}
	return t, key, nil
}

// PurgeBenchmarkTenants deletes the tenants a benchmark run created (and,
// through them, their contracts, facts, actions, verdicts and connectors)
// and its model-driven agent's write-ahead steps (copies of model and tool
// answers), in one statement, returning how many tenants. The run's own row
// and results stay; a tenant merely named like the run is not one of them.
func (s *Store) PurgeBenchmarkTenants(ctx context.Context, runID string) (int, error) {
	if runID == "" {
		return 0, fmt.Errorf("purge benchmark tenants: %w: run id is required", commitlayer.ErrInvalid)
	}
	tag, err := s.pool.Exec(ctx, `WITH steps AS (DELETE FROM benchmark.agent_steps WHERE run_id = $1)
		DELETE FROM tenants WHERE id IN (SELECT tenant_id FROM benchmark.run_tenants WHERE run_id = $1)`, runID)
	if err != nil {
		return 0, fmt.Errorf("purge benchmark tenants of %s: %w", runID, classify(err))
	}
	return int(tag.RowsAffected()), nil
}

// BenchmarkTenants returns the tenants a benchmark run created (its rows in
// benchmark.run_tenants, as PurgeBenchmarkTenants finds them), oldest
// first: what `commitlayer check --results` reads of a finished run.
func (s *Store) BenchmarkTenants(ctx context.Context, runID string) ([]commitlayer.Tenant, error) {
	if runID == "" {
		return nil, fmt.Errorf("benchmark tenants: %w: run id is required", commitlayer.ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, `SELECT t.id, t.name, t.created_at FROM tenants t
		JOIN benchmark.run_tenants r ON r.tenant_id = t.id WHERE r.run_id = $1
		ORDER BY t.created_at, t.id`, runID)
	if err != nil {
		return nil, fmt.Errorf("benchmark tenants of %s: %w", runID, classify(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (commitlayer.Tenant, error) {
		var t commitlayer.Tenant
		err := row.Scan(&t.ID, &t.Name, &t.CreatedAt)
		t.CreatedAt = t.CreatedAt.UTC()
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("benchmark tenants of %s: %w", runID, classify(err))
	}
	return out, nil
}

// LatestPassLatencies is, per action, how long the pass that stored its
// latest verdict took; an action without a measured pass is absent.
func (s *Store) LatestPassLatencies(ctx context.Context, tenantID string, actionIDs []string) (map[string]time.Duration, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (action_id) action_id, pass_us FROM verdicts
		WHERE tenant_id = $1 AND action_id = ANY($2) ORDER BY action_id, version DESC`, tenantID, actionIDs)
	if err != nil {
		return nil, fmt.Errorf("pass latencies of %s: %w", tenantID, classify(err))
	}
	out := make(map[string]time.Duration, len(actionIDs))
	var (
		id string
		us *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &us}, func() error {
		if us != nil {
			out[id] = time.Duration(*us) * time.Microsecond
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pass latencies of %s: %w", tenantID, classify(err))
	}
	return out, nil
}

// PassLatency is how long the worker's pass that stored an action's verdict
// version took (the product keeps it in the verdict's row, pass_us, for
// measurements like the matrix's); zero when not measured.
func (s *Store) PassLatency(ctx context.Context, tenantID, actionID string, version int) (time.Duration, error) {
	var us *int64
	err := s.pool.QueryRow(ctx, `SELECT pass_us FROM verdicts WHERE tenant_id = $1 AND action_id = $2 AND version = $3`,
		tenantID, actionID, version).Scan(&us)
	if err != nil {
		return 0, fmt.Errorf("pass latency of %s version %d: %w", actionID, version, err)
	}
	if us == nil {
		return 0, nil
	}
	return time.Duration(*us) * time.Microsecond, nil
}
