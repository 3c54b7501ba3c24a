package benchstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
)

func TestPurgeBenchmarkTenants(t *testing.T) {
	testDB := benchstoretest.Store(t)
	d := testDB
	ctx := context.Background()
	mine1, _, err := d.CreateBenchmarkTenant(ctx, "run-a", "refund/baseline")
	require.NoError(t, err)
	_, _, err = d.CreateBenchmarkTenant(ctx, "run-a", "payout/baseline")
	require.NoError(t, err)
	other, _, err := d.CreateBenchmarkTenant(ctx, "run-ab", "refund/baseline")
	require.NoError(t, err)
	// Named exactly as the run's tenants are, but not created by it.
	customer, _, err := d.CreateTenant(ctx, "benchmark run-a refund/baseline")
	require.NoError(t, err)
	wild, _, err := d.CreateBenchmarkTenant(ctx, "runXa", "refund/baseline")
	require.NoError(t, err)

	for _, run := range []string{"run-a", "run-ab"} {
		_, _, err = d.BeginAgentStep(ctx, run, "refund/baseline", "turn", 0, []byte{1})
		require.NoError(t, err)
	}

	n, err := d.PurgeBenchmarkTenants(ctx, "run-a")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Zero(t, benchstoretest.CountAgentSteps(t, d, "run-a", "refund/baseline", "turn"), "the run's agent steps go with its tenants")
	require.Equal(t, 1, benchstoretest.CountAgentSteps(t, d, "run-ab", "refund/baseline", "turn"), "another run's steps stay")
	tenants, err := d.ListTenants(ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, tn := range tenants {
		ids[tn.ID] = true
	}
	require.False(t, ids[mine1.ID])
	require.True(t, ids[other.ID], "another run whose id starts the same stays")
	require.True(t, ids[customer.ID], "a tenant merely named like the run's stays")

	// Pattern characters in a run id match only themselves.
	for _, pattern := range []string{"run_a", "run%", "%"} {
		n, err = d.PurgeBenchmarkTenants(ctx, pattern)
		require.NoError(t, err)
		require.Zero(t, n, pattern)
	}
	require.True(t, tenantExists(t, d, wild.ID))

	_, err = d.PurgeBenchmarkTenants(ctx, "")
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
	_, _, err = d.CreateBenchmarkTenant(ctx, "", "x")
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
}

func tenantExists(t *testing.T, d *benchstore.Store, id string) bool {
	t.Helper()
	tenants, err := d.ListTenants(context.Background())
	require.NoError(t, err)
	for _, tn := range tenants {
		if tn.ID == id {
			return true
		}
	}
	return false
}

// TestBenchmarkTenants: a run's tenants, by their mark, not by name.
func TestBenchmarkTenants(t *testing.T) {
	d := benchstoretest.Store(t)
	ctx := context.Background()
	run := fmt.Sprintf("run-cb-%d", time.Now().UnixNano())
	a, _, err := d.CreateBenchmarkTenant(ctx, run, "refund/baseline")
	require.NoError(t, err)
	b, _, err := d.CreateBenchmarkTenant(ctx, run, "refund/phantom_success")
	require.NoError(t, err)
	_, _, err = d.CreateBenchmarkTenant(ctx, run+"x", "refund/baseline")
	require.NoError(t, err)
	_, _, err = d.CreateTenant(ctx, "benchmark "+run+" refund/baseline")
	require.NoError(t, err)
	got, err := d.BenchmarkTenants(ctx, run)
	require.NoError(t, err)
	require.Len(t, got, 2, "only the run's own tenants, by their mark")
	require.ElementsMatch(t, []string{a.ID, b.ID}, []string{got[0].ID, got[1].ID})
	_, err = d.BenchmarkTenants(ctx, "")
	require.ErrorIs(t, err, commitlayer.ErrInvalid)

	// A tenant deleted by the product takes its mark along.
	require.NoError(t, d.DeleteTenant(ctx, a.ID))
	got, err = d.BenchmarkTenants(ctx, run)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, b.ID, got[0].ID)
}
