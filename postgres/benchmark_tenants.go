package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/commitlayer/commitlayer"
)

// BenchmarkTenantName names the tenant a benchmark run creates for one of
// its scenarios; PurgeBenchmarkTenants finds them by it.
func BenchmarkTenantName(runID, scenarioID string) string {
	return "benchmark " + runID + " " + scenarioID
}

// PurgeBenchmarkTenants deletes the tenants a benchmark run created (and,
// through them, their contracts, facts, actions, verdicts and connectors),
// returning how many. The run's own row and results stay.
func (db *DB) PurgeBenchmarkTenants(ctx context.Context, runID string) (int, error) {
	if runID == "" || strings.ContainsAny(runID, " \x00") {
		return 0, fmt.Errorf("purge benchmark tenants: run id %q: %w", runID, commitlayer.ErrInvalid)
	}
	escaped := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(runID)
	tag, err := db.pool.Exec(ctx, `DELETE FROM tenants WHERE name LIKE $1 ESCAPE '\'`, "benchmark "+escaped+" %")
	if err != nil {
		return 0, fmt.Errorf("purge benchmark tenants of %s: %w", runID, classify(err))
	}
	return int(tag.RowsAffected()), nil
}
