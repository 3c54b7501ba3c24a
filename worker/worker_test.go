package worker_test

import (
	"context"
	"strings"
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

// TestMakeCurrentPolicies starts two builds of one deployment on the dev
// server: the first start of a fleet makes its build current (auto), a
// later build leaves the routing to the operator (auto, never), always
// takes over, and a ramp is read back.
func TestMakeCurrentPolicies(t *testing.T) {
	addr := testenv.TemporalAddress(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: testenv.Namespace()})
	require.NoError(t, err)
	defer c.Close()

	suffix := time.Now().Format("150405.000000")
	name := "commitlayer-policy-" + strings.ReplaceAll(suffix, ".", "")
	queue := name + "-queue"
	start := func(build string) worker.Deployment {
		d := worker.Deployment{Name: name, BuildID: build}
		w := worker.NewBare(c, queue, worker.Options{Deployment: d})
		worker.RegisterWorkflows(w)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
		return d
	}
	a := start("build-a")
	changed, err := worker.MakeCurrent(ctx, c, a, worker.CurrentIfNone, "test")
	require.NoError(t, err)
	require.True(t, changed, "the first build of a deployment becomes current")
	changed, err = worker.MakeCurrent(ctx, c, a, worker.CurrentAlways, "test")
	require.NoError(t, err)
	require.False(t, changed, "already current")

	b := start("build-b")
	for _, p := range []worker.CurrentPolicy{worker.CurrentIfNone, worker.CurrentNever} {
		changed, err = worker.MakeCurrent(ctx, c, b, p, "test")
		require.NoError(t, err)
		require.False(t, changed, p)
	}
	require.NoError(t, worker.SetRamping(ctx, c, b, 40, "test"))
	st, err := worker.DescribeDeployment(ctx, c, name)
	require.NoError(t, err)
	require.Equal(t, "build-a", st.Current)
	require.Equal(t, "build-b", st.Ramping)
	require.InDelta(t, 40, st.RampPercent, 0.01)
	vb, ok := versionOf(st, "build-b")
	require.True(t, ok)
	require.True(t, vb.Ramping)

	changed, err = worker.MakeCurrent(ctx, c, b, worker.CurrentAlways, "test")
	require.NoError(t, err)
	require.True(t, changed)
	st, err = worker.DescribeDeployment(ctx, c, name)
	require.NoError(t, err)
	require.Equal(t, "build-b", st.Current)
	require.Empty(t, st.Ramping, "the ramping build became current")
	require.Error(t, worker.SetRamping(ctx, c, b, 140, "test"), "a percentage above 100")
}

// versionOf returns the state of one build, if the deployment has it.
func versionOf(s worker.DeploymentState, buildID string) (worker.VersionState, bool) {
	for _, v := range s.Versions {
		if v.BuildID == buildID {
			return v, true
		}
	}
	return worker.VersionState{}, false
}
