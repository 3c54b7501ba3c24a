package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestAdminRoutesDisabledWithoutAdminKey(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AdminKey = "" })
	for _, k := range []string{"", "anything"} {
		res := e.do(req{method: "GET", path: "/v1/admin/tenants", key: k})
		require.Equal(t, http.StatusUnauthorized, res.Status)
	}
	res := e.do(req{method: "GET", path: "/v1/admin/tenants", header: map[string]string{"Authorization": "Bearer"}})
	require.Equal(t, http.StatusUnauthorized, res.Status)
}

func TestAdminTenants(t *testing.T) {
	e := newEnv(t)
	id, key := e.tenant("  Acme Support  ")
	require.NotEmpty(t, key)
	res := e.do(req{method: "GET", path: "/v1/admin/tenants", key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct{ Tenants []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &list))
	found := false
	for _, tn := range list.Tenants {
		if tn["id"] == id {
			found = true
			require.Equal(t, "Acme Support", tn["name"])
		}
		require.NotContains(t, tn, "api_key", "keys are shown once")
	}
	require.True(t, found)
	// The new key works on tenant routes.
	res = e.do(req{method: "GET", path: "/v1/contracts", key: key})
	require.Equal(t, http.StatusOK, res.Status)

	for _, tc := range []struct {
		name string
		body any
		want int
		code string
	}{
		{"malformed", `{"name"`, http.StatusBadRequest, codeInvalidJSON},
		{"missing", `{}`, http.StatusBadRequest, codeInvalidRequest},
		{"blank", `{"name":"  "}`, http.StatusBadRequest, codeInvalidRequest},
		{"wrong type", `{"name":5}`, http.StatusBadRequest, codeInvalidRequest},
		{"unknown field", `{"name":"x","plan":"pro"}`, http.StatusBadRequest, codeInvalidRequest},
		{"too long", map[string]string{"name": strings.Repeat("n", 201)}, http.StatusBadRequest, codeInvalidRequest},
		{"NUL", map[string]string{"name": "a\u0000b"}, http.StatusBadRequest, codeInvalidRequest},
		{"over limit", map[string]string{"name": strings.Repeat("n", MaxBody)}, http.StatusRequestEntityTooLarge, codeTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(req{method: "POST", path: "/v1/admin/tenants", key: adminKey, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t))
		})
	}
}

func TestAdminBenchmark(t *testing.T) {
	e := newEnv(t)
	res := e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: map[string]any{"only": []string{"refund/"}, "concurrency": 4}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	m := res.json(t)
	id := m["id"].(string)
	require.Equal(t, "running", m["status"])
	require.Equal(t, "/v1/admin/benchmark/"+id, res.Header.Get("Location"))
	require.Equal(t, []BenchmarkRequest{{Only: []string{"refund/"}, Concurrency: 4}}, e.bench.reqs)

	// The runner finishes it; the run shows everything.
	run, err := e.db.GetBenchmarkRun(context.Background(), id)
	require.NoError(t, err)
	run.Status, run.Summary, run.Results = "done", json.RawMessage(`{"scenarios":2}`), json.RawMessage(`[{"id":"refund/ok"}]`)
	run.Markdown, run.LogTail, run.FinishedAt = "| a | b |", "done\n", e.now
	require.NoError(t, e.db.UpdateBenchmarkRun(context.Background(), run))

	res = e.do(req{method: "GET", path: "/v1/admin/benchmark/" + id, key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	m = res.json(t)
	require.Equal(t, "done", m["status"])
	require.Equal(t, map[string]any{"scenarios": float64(2)}, m["summary"])
	require.Equal(t, []any{map[string]any{"id": "refund/ok"}}, m["results"])
	require.Equal(t, "| a | b |", m["markdown"])
	require.Equal(t, "done\n", m["log_tail"])
	require.Equal(t, map[string]any{"only": []any{"refund/"}, "concurrency": float64(4)}, m["request"])
	require.NotNil(t, m["finished_at"])

	res = e.do(req{method: "GET", path: "/v1/admin/benchmark", key: adminKey})
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

	res = e.do(req{method: "GET", path: "/v1/admin/benchmark/bench_nope", key: adminKey})
	require.Equal(t, http.StatusNotFound, res.Status)

	// Purging a finished run deletes the tenants it made, not others.
	ctx := context.Background()
	for _, sc := range []string{"refund/a", "refund/b"} {
		_, _, err := e.db.CreateBenchmarkTenant(ctx, id, sc)
		require.NoError(t, err)
	}
	bystander, _, err := e.db.CreateTenant(ctx, "benchmark bystander")
	require.NoError(t, err)
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/" + id + "/tenants", key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"id": id, "purged_tenants": float64(2)}, res.json(t))
	tenants, err := e.db.ListTenants(ctx)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, tn := range tenants {
		names[tn.ID] = true
	}
	require.True(t, names[bystander.ID])
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/bench_nope/tenants", key: adminKey})
	require.Equal(t, http.StatusNotFound, res.Status)
	_, tenantKey := e.tenant("purger")
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/" + id + "/tenants", key: tenantKey})
	require.Equal(t, http.StatusForbidden, res.Status)

	for _, tc := range []struct {
		name string
		body any
		want int
		code string
	}{
		{"malformed", `{`, http.StatusBadRequest, codeInvalidJSON},
		{"unknown field", `{"provider":"x"}`, http.StatusBadRequest, codeInvalidRequest},
		{"only wrong type", `{"only":"refund/"}`, http.StatusBadRequest, codeInvalidRequest},
		{"only blank", `{"only":[" "]}`, http.StatusBadRequest, codeInvalidRequest},
		{"concurrency negative", `{"concurrency":-1}`, http.StatusBadRequest, codeInvalidRequest},
		{"concurrency huge", `{"concurrency":1000}`, http.StatusBadRequest, codeInvalidRequest},
		{"payments wrong type", `{"payments":5}`, http.StatusBadRequest, codeInvalidRequest},
		{"payments not a name", map[string]string{"payments": strings.Repeat("p", 51)}, http.StatusBadRequest, codeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t))
		})
	}

	// A running run is not purged.
	res = e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: `{}`})
	require.Equal(t, http.StatusAccepted, res.Status)
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/" + res.json(t)["id"].(string) + "/tenants", key: adminKey})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, codeBenchmarkRunning, res.errCode(t))

	// The runner refuses a request it cannot run: 422.
	e.bench.err = fmt.Errorf("start: %w", &commitlayer.FieldError{Field: "only[0]", Reason: "matches no scenario"})
	res = e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: `{"only":["zzz/"]}`})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status)
	require.Equal(t, codeInvalidBenchmark, res.errCode(t))

	// Without a runner: 503, and runs are still listed.
	e2 := newEnv(t, func(c *Config) { c.Benchmarks = nil })
	res = e2.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: `{}`})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	res = e2.do(req{method: "GET", path: "/v1/admin/benchmark", key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
}
