package benchapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

// doneRunner stores a finished run, as the runner would at its end.
type doneRunner struct{ store *benchstore.Store }

func (b doneRunner) Start(ctx context.Context, req bench.Request) (benchstore.Run, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return benchstore.Run{}, err
	}
	return b.store.CreateBenchmarkRun(ctx, benchstore.Run{Status: "done", Request: raw})
}

// TestClientCalls: the benchmark's client against the mounted routes,
// over HTTP, errors answered as the product's client answers them.
func TestClientCalls(t *testing.T) {
	e := newEnv(t, func(a *API) { a.Runner = doneRunner{a.Runs.(*benchstore.Store)} })
	hs := httptest.NewServer(e.srv.Handler())
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := NewClient(hs.URL, adminKey, nil)
	require.NoError(t, err)

	run, err := admin.Start(ctx, bench.Request{Only: []string{"refund/"}, Concurrency: 2})
	require.NoError(t, err)
	require.Equal(t, "/v1/admin/benchmark/"+run.ID, run.URL)
	runs, err := admin.List(ctx)
	require.NoError(t, err)
	require.Contains(t, runIDs(runs), run.ID)
	full, err := admin.Get(ctx, run.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"only":["refund/"],"concurrency":2}`, string(full.Request))
	purged, err := admin.PurgeTenants(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, run.ID, purged.ID)
	_, err = admin.Get(ctx, "bench_nope")
	require.True(t, client.IsNotFound(err))
	_, err = admin.Start(ctx, bench.Request{Concurrency: 1000})
	require.True(t, client.IsCode(err, "invalid_request"), "%v", err)
}

func runIDs(runs []RunView) []string {
	out := make([]string, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}
