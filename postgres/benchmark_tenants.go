package postgres

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// CreateBenchmarkTenant creates the tenant a benchmark run uses for one of
// its scenarios (named "benchmark <run> <scenario>"), marked with the run's
// id so PurgeBenchmarkTenants finds it by that column, never by its name.
func (db *DB) CreateBenchmarkTenant(ctx context.Context, runID, scenarioID string) (commitlayer.Tenant, string, error) {
	if runID == "" {
		return commitlayer.Tenant{}, "", fmt.Errorf("create benchmark tenant: %w: run id is required", commitlayer.ErrInvalid)
	}
	return db.createTenant(ctx, "benchmark "+runID+" "+scenarioID, &runID)
}

// PurgeBenchmarkTenants deletes the tenants a benchmark run created (and,
// through them, their contracts, facts, actions, verdicts and connectors)
// and its model-driven agent's write-ahead steps (copies of model and tool
// answers), in one statement, returning how many tenants. The run's own row and results stay; a tenant merely
// named like the run is not one of them.
func (db *DB) PurgeBenchmarkTenants(ctx context.Context, runID string) (int, error) {
	if runID == "" {
		return 0, fmt.Errorf("purge benchmark tenants: %w: run id is required", commitlayer.ErrInvalid)
	}
	tag, err := db.pool.Exec(ctx, `WITH steps AS (DELETE FROM benchmark_agent_steps WHERE run_id = $1)
		DELETE FROM tenants WHERE benchmark_run_id = $1`, runID)
	if err != nil {
		return 0, fmt.Errorf("purge benchmark tenants of %s: %w", runID, classify(err))
	}
	return int(tag.RowsAffected()), nil
}
