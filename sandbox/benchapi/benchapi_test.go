package benchapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

func TestAdminBenchmark(t *testing.T) {
	e := newEnv(t)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: map[string]any{"only": []string{"refund/"}, "concurrency": 4}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	m := res.JSON(t)
	id := m["id"].(string)
	require.Equal(t, "running", m["status"])
	require.Equal(t, "/v1/admin/benchmark/"+id, res.Header.Get("Location"))
	require.Equal(t, []bench.Request{{Only: []string{"refund/"}, Concurrency: 4}}, e.runner.reqs)

	// The runner finishes it; the run shows everything.
	ctx := context.Background()
	run, err := e.store.GetBenchmarkRun(ctx, id)
	require.NoError(t, err)
	run.Status, run.Summary, run.Results = "done", json.RawMessage(`{"scenarios":2}`), json.RawMessage(`[{"id":"refund/ok"}]`)
	run.Markdown, run.LogTail, run.FinishedAt = "| a | b |", "done\n", run.StartedAt.Add(90e9)
	require.NoError(t, e.store.UpdateBenchmarkRun(ctx, run))

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark/" + id, Key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	m = res.JSON(t)
	require.Equal(t, "done", m["status"])
	require.Equal(t, map[string]any{"scenarios": float64(2)}, m["summary"])
	require.Equal(t, []any{map[string]any{"id": "refund/ok"}}, m["results"])
	require.Equal(t, "| a | b |", m["markdown"])
	require.Equal(t, "done\n", m["log_tail"])
	require.Equal(t, map[string]any{"only": []any{"refund/"}, "concurrency": float64(4)}, m["request"])
	require.NotNil(t, m["finished_at"])

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark", Key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct{ Runs []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &list))
	var mine map[string]any
	for _, r := range list.Runs {
		if r["id"] == id {
			mine = r
		}
	}
	require.NotNil(t, mine)
	require.NotContains(t, mine, "results", "the list leaves out the per-scenario rows")

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark/bench_nope", Key: adminKey})
	require.Equal(t, http.StatusNotFound, res.Status)

	// Purging a finished run deletes the tenants it made, not others.
	for _, sc := range []string{"refund/a", "refund/b"} {
		_, _, err := e.store.CreateBenchmarkTenant(ctx, id, sc)
		require.NoError(t, err)
	}
	bystander, _, err := e.store.CreateTenant(ctx, "benchmark bystander")
	require.NoError(t, err)
	res = e.do(apitest.Request{Method: "DELETE", Path: "/v1/admin/benchmark/" + id + "/tenants", Key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"id": id, "purged_tenants": float64(2)}, res.JSON(t))
	tenants, err := e.store.ListTenants(ctx)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, tn := range tenants {
		names[tn.ID] = true
	}
	require.True(t, names[bystander.ID])
	res = e.do(apitest.Request{Method: "DELETE", Path: "/v1/admin/benchmark/bench_nope/tenants", Key: adminKey})
	require.Equal(t, http.StatusNotFound, res.Status)
	tenantKey := e.tenant("purger")
	res = e.do(apitest.Request{Method: "DELETE", Path: "/v1/admin/benchmark/" + id + "/tenants", Key: tenantKey})
	require.Equal(t, http.StatusForbidden, res.Status)

	for _, tc := range []struct {
		name string
		body any
		want int
		code string
	}{
		{"malformed", `{`, http.StatusBadRequest, "invalid_json"},
		{"field twice", `{"concurrency":1,"concurrency":64}`, http.StatusBadRequest, "invalid_json"},
		{"unknown field", `{"providr":"x"}`, http.StatusBadRequest, "invalid_request"},
		{"only wrong type", `{"only":"refund/"}`, http.StatusBadRequest, "invalid_request"},
		{"only blank", `{"only":[" "]}`, http.StatusBadRequest, "invalid_request"},
		{"concurrency negative", `{"concurrency":-1}`, http.StatusBadRequest, "invalid_request"},
		{"concurrency huge", `{"concurrency":1000}`, http.StatusBadRequest, "invalid_request"},
		{"payments wrong type", `{"payments":5}`, http.StatusBadRequest, "invalid_request"},
		{"payments not a name", map[string]string{"payments": strings.Repeat("p", 51)}, http.StatusBadRequest, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.ErrCode(t))
		})
	}
	require.Len(t, e.runner.reqs, 1, "no bad request reached the runner")

	// A body labelled as something else than JSON is 415, as on the API's
	// own routes.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: `{}`,
		Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	require.Equal(t, http.StatusUnsupportedMediaType, res.Status, "%s", res.Body)

	// A running run is not purged.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: `{}`})
	require.Equal(t, http.StatusAccepted, res.Status)
	res = e.do(apitest.Request{Method: "DELETE", Path: "/v1/admin/benchmark/" + res.JSON(t)["id"].(string) + "/tenants", Key: adminKey})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, CodeBenchmarkRunning, res.ErrCode(t))

	// The runner refuses a request it cannot run: 422.
	e.runner.err = fmt.Errorf("start: %w", &commitlayer.FieldError{Field: "only[0]", Reason: "matches no scenario"})
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: `{"only":["zzz/"]}`})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status)
	require.Equal(t, CodeInvalidBenchmark, res.ErrCode(t))
	// Anything else from the runner is a generic 500.
	e.runner.err = errors.New("temporal at 10.0.0.1 refused (secret detail)")
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: `{}`})
	require.Equal(t, http.StatusInternalServerError, res.Status)
	require.NotContains(t, string(res.Body), "secret detail")

	// Without a runner: 503, and runs are still listed.
	e2 := newEnv(t, func(a *API) { a.Runner = nil })
	res = e2.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: `{}`})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	res = e2.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark", Key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
}

// TestAuth: every benchmark route is an admin route: no key or a wrong one
// is 401, a tenant's key 403, and nothing reaches the runner.
func TestAuth(t *testing.T) {
	e := newEnv(t)
	tenantKey := e.tenant("auth")
	for _, m := range (&API{}).Mounts() {
		method, path, _ := strings.Cut(m.Pattern, " ")
		path = strings.ReplaceAll(path, "{id}", "bench_x")
		for key, want := range map[string]int{"": http.StatusUnauthorized, "cl_nope_nope": http.StatusUnauthorized, tenantKey: http.StatusForbidden} {
			res := e.do(apitest.Request{Method: method, Path: path, Key: key, Body: `{}`})
			require.Equal(t, want, res.Status, "%s with %q: %s", m.Pattern, key, res.Body)
		}
	}
	require.Empty(t, e.runner.reqs)
}

// TestInternalErrors: a store failure is a generic 500, its detail only in
// the log with the request id.
func TestInternalErrors(t *testing.T) {
	e := newEnv(t)
	run, err := e.store.CreateBenchmarkRun(context.Background(), benchstore.Run{Status: "done"})
	require.NoError(t, err)
	for _, tc := range []struct{ fail, method, path string }{
		{"ListBenchmarkRuns", "GET", "/v1/admin/benchmark"},
		{"GetBenchmarkRun", "GET", "/v1/admin/benchmark/" + run.ID},
		{"GetBenchmarkRun", "GET", "/v1/admin/benchmark/" + run.ID + "/report"},
		{"PurgeBenchmarkTenants", "DELETE", "/v1/admin/benchmark/" + run.ID + "/tenants"},
	} {
		t.Run(tc.fail+" "+tc.method+" "+tc.path, func(t *testing.T) {
			fe := newEnv(t, func(a *API) { a.Runs = failingRuns{Runs: e.store, method: tc.fail}; a.Reports = fakeReports{} })
			res := fe.do(apitest.Request{Method: tc.method, Path: tc.path, Key: adminKey})
			require.Equal(t, http.StatusInternalServerError, res.Status, "%s", res.Body)
			require.JSONEq(t, `{"error":{"code":"internal","message":"internal error"}}`, string(res.Body))
			logs := fe.logs.String()
			require.Contains(t, logs, "secret detail")
			require.Contains(t, logs, res.Header.Get("X-Request-Id"))
		})
	}
}

type fakeReports struct{ fail bool }

func (f fakeReports) Render(run benchstore.Run) ([]byte, error) {
	if f.fail {
		return nil, errors.New("render failed (secret detail)")
	}
	return []byte("<!DOCTYPE html><html><body>report of " + run.ID + "</body></html>"), nil
}

// TestBenchmarkReport: the admin route answers a run's HTML report, with a
// strict content security policy; 404 for no such run, 503 without a
// renderer, a failed render a generic 500; tenants may not see it.
func TestBenchmarkReport(t *testing.T) {
	e := newEnv(t, func(a *API) { a.Reports = fakeReports{} })
	tenantKey := e.tenant("report-tenant")
	run, err := e.store.CreateBenchmarkRun(context.Background(), benchstore.Run{Status: "done"})
	require.NoError(t, err)
	res := e.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark/" + run.ID + "/report", Key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, string(res.Body), "report of "+run.ID)
	require.Equal(t, http.StatusNotFound, e.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark/bench_nope/report", Key: adminKey}).Status)
	require.Equal(t, http.StatusForbidden, e.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark/" + run.ID + "/report", Key: tenantKey}).Status)

	off := newEnv(t)
	require.Equal(t, http.StatusServiceUnavailable, off.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark/" + run.ID + "/report", Key: adminKey}).Status)
	bad := newEnv(t, func(a *API) { a.Reports = fakeReports{fail: true} })
	res = bad.do(apitest.Request{Method: "GET", Path: "/v1/admin/benchmark/" + run.ID + "/report", Key: adminKey})
	require.Equal(t, http.StatusInternalServerError, res.Status)
	require.NotContains(t, string(res.Body), "secret detail")
}

// TestOpenAPIFragment: the fragment documents exactly the mounted routes.
func TestOpenAPIFragment(t *testing.T) {
	var frag struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI, &frag))
	documented := map[string]bool{}
	for path, item := range frag.Paths {
		for method := range item {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	mounted := map[string]bool{}
	for _, m := range (&API{}).Mounts() {
		mounted[m.Pattern] = true
	}
	require.Equal(t, mounted, documented)
}
