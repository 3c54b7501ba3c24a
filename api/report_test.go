package api

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

type fakeReports struct{ fail bool }

func (f fakeReports) Render(run commitlayer.BenchmarkRun) ([]byte, error) {
	if f.fail {
		return nil, errors.New("render failed (secret detail)")
	}
	return []byte("<!DOCTYPE html><html><body>report of " + run.ID + "</body></html>"), nil
}

// TestBenchmarkReport: the admin route answers a run's HTML report, with a
// strict content security policy; 404 for no such run, 503 without a
// renderer, a failed render a generic 500; tenants may not see it.
func TestBenchmarkReport(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Reports = fakeReports{} })
	_, tenantKey := e.tenant("report-tenant")
	run, err := e.db.CreateBenchmarkRun(context.Background(), commitlayer.BenchmarkRun{Status: "done"})
	require.NoError(t, err)
	res := e.do(req{method: "GET", path: "/v1/admin/benchmark/" + run.ID + "/report", key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, string(res.Body), "report of "+run.ID)
	require.Equal(t, http.StatusNotFound, e.do(req{method: "GET", path: "/v1/admin/benchmark/bench_nope/report", key: adminKey}).Status)
	require.Equal(t, http.StatusForbidden, e.do(req{method: "GET", path: "/v1/admin/benchmark/" + run.ID + "/report", key: tenantKey}).Status)

	off := newEnv(t)
	require.Equal(t, http.StatusServiceUnavailable, off.do(req{method: "GET", path: "/v1/admin/benchmark/" + run.ID + "/report", key: adminKey}).Status)
	bad := newEnv(t, func(c *Config) { c.Reports = fakeReports{fail: true} })
	res = bad.do(req{method: "GET", path: "/v1/admin/benchmark/" + run.ID + "/report", key: adminKey})
	require.Equal(t, http.StatusInternalServerError, res.Status)
	require.NotContains(t, string(res.Body), "secret detail")
}
