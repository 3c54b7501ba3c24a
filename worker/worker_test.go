package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/worker"
	"github.com/commitlayer/commitlayer/workflows"
)

func TestEnsureSearchAttributesIsIdempotent(t *testing.T) {
	addr := testenv.TemporalAddress(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: testenv.Namespace()})
	require.NoError(t, err)
	defer c.Close()

	require.NoError(t, worker.EnsureSearchAttributes(ctx, c, testenv.Namespace()))
	require.NoError(t, worker.EnsureSearchAttributes(ctx, c, testenv.Namespace()), "a second worker starting")
	got, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: testenv.Namespace()})
	require.NoError(t, err)
	for _, k := range workflows.SearchAttributes {
		typ, ok := got.GetCustomAttributes()[k.GetName()]
		require.True(t, ok, "%s is not registered", k.GetName())
		require.Equal(t, k.GetValueType(), typ, k.GetName())
	}
}
