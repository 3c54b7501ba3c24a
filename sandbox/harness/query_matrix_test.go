package harness

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
)

// querySystems are the refund workflow's sources (its contract's
// sources), read in TestMatrixWithQueryConnectors through the http_json
// query connector instead of their event feeds.
var querySystems = []string{"payments", "orders", "tickets"}

// TestMatrixWithQueryConnectors runs every scenario of the refund workflow
// with its sources read by the http_json query connector
// (QueryConfig: GET, JSON Pointers, the API's cursor) in place of
// the http_events feed connector, chaos included: CommitLayer must still
// agree with the oracle on both lenses, flag exactly the stray subjects,
// exercise what each scenario's name says, and `commitlayer check` must
// give the same verdict on what was pulled.
func TestMatrixWithQueryConnectors(t *testing.T) {
	var scs []catalogue.Scenario
	for _, sc := range catalogue.Catalogue() {
		if sc.Process == business.Refund {
			scs = append(scs, sc)
		}
	}
	require.NotEmpty(t, scs)
	c := contractFor(t, business.Refund)
	for _, s := range querySystems {
		require.True(t, slices.Contains(c.Sources(), s), "%s is a source of the refund contract", s)
	}
	cfg := QueryConfig("http://127.0.0.1:1", "payments")
	require.Equal(t, "/events", cfg.Items, "the records are found by JSON Pointer")
	for _, sc := range scs {
		t.Run(sc.ID, func(t *testing.T) {
			t.Parallel()
			run, err := runLocal(context.Background(), t, t.TempDir(), sc, c, querySystems...)
			require.NoError(t, err)
			require.True(t, run.row.Agree.Outcome, "outcome lens disagrees with the oracle%s", run.explain())
			require.True(t, run.row.Agree.Policy, "policy lens disagrees with the oracle%s", run.explain())
			require.Equal(t, run.row.Stray, run.row.Orphans, "CommitLayer's orphans are not the stray subjects%s", run.explain())
			check, ok := exercises[sc.Injection]
			if !ok && sc.Family == "outage" {
				check, ok = exercisesOutage, true
			}
			require.True(t, ok, "no check that %s exercises what its name says", sc.ID)
			check(t, sc, run)
			sameAsCheck(t, sc, run)
		})
	}
}
