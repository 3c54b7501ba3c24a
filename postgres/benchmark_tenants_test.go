package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPurgeBenchmarkTenants(t *testing.T) {
	testDB := testStore(t)
	d := testDB
	ctx := context.Background()
	mine1, _, err := d.CreateTenant(ctx, BenchmarkTenantName("run-a", "refund/baseline"))
	require.NoError(t, err)
	_, _, err = d.CreateTenant(ctx, BenchmarkTenantName("run-a", "payout/baseline"))
	require.NoError(t, err)
	other, _, err := d.CreateTenant(ctx, BenchmarkTenantName("run-ab", "refund/baseline"))
	require.NoError(t, err)
	customer, _, err := d.CreateTenant(ctx, "benchmark run-a")
	require.NoError(t, err)

	n, err := d.PurgeBenchmarkTenants(ctx, "run-a")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = d.ListConnectors(ctx, mine1.ID)
	require.NoError(t, err)
	tenants, err := d.ListTenants(ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, tn := range tenants {
		ids[tn.ID] = true
	}
	require.False(t, ids[mine1.ID])
	require.True(t, ids[other.ID], "another run whose id starts the same stays")
	require.True(t, ids[customer.ID], "a tenant merely named like the run stays")

	// LIKE wildcards in a run id match only themselves.
	wild, _, err := d.CreateTenant(ctx, BenchmarkTenantName("runXa", "refund/baseline"))
	require.NoError(t, err)
	n, err = d.PurgeBenchmarkTenants(ctx, "run_a")
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = d.PurgeBenchmarkTenants(ctx, "run%")
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, d.DeleteTenant(ctx, wild.ID))

	for _, bad := range []string{"", "a b", "x\x00"} {
		_, err := d.PurgeBenchmarkTenants(ctx, bad)
		require.True(t, errors.Is(err, ErrInvalid), "%q: %v", bad, err)
	}
}
