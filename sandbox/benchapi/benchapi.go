// Package benchapi serves the sandbox benchmark's admin routes on the
// product's API: start a run (POST /v1/admin/benchmark), list and read
// runs, render a run's report, purge a finished run's tenants. cmd mounts
// them (API.Mounts, OpenAPI) onto api.Server, which gives them the admin
// key, request ids, metrics and its error shape; the API itself knows
// nothing of benchmarks.
package benchapi

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

// OpenAPI documents the routes: an OpenAPI fragment (paths and
// components) for api.Config.OpenAPIFragments.
//
//go:embed openapi.json
var OpenAPI []byte

// Error codes of the benchmark routes, besides the API's own.
const (
	// CodeInvalidBenchmark: the runner cannot run what the request names
	// (a scenario prefix matching nothing, an unknown payments backend, a
	// run to replay that is not there): 422.
	CodeInvalidBenchmark = "invalid_benchmark"
	// CodeBenchmarkRunning: a running run's tenants cannot be purged: 409.
	CodeBenchmarkRunning = "benchmark_running"
)

// Runs serves stored benchmark runs (*benchstore.Store).
type Runs interface {
	GetBenchmarkRun(ctx context.Context, id string) (benchstore.Run, error)
	ListBenchmarkRuns(ctx context.Context) ([]benchstore.Run, error)
	PurgeBenchmarkTenants(ctx context.Context, runID string) (int, error)
}

// Runner starts benchmark runs (*bench.Runner). A Start error wrapping a
// *commitlayer.FieldError is the request's fault (422); others are 500.
type Runner interface {
	Start(ctx context.Context, req bench.Request) (benchstore.Run, error)
}

// Reports renders a stored run as one self-contained HTML page
// (bench.Reports).
type Reports interface {
	Render(run benchstore.Run) ([]byte, error)
}

// API is the benchmark's routes and what they use.
type API struct {
	Runs Runs
	// Runner starts runs; nil answers 503 on POST (runs already stored
	// are still listed).
	Runner Runner
	// Reports renders GET /v1/admin/benchmark/{id}/report; nil answers 503.
	Reports Reports
}

// Mounts lists the routes for api.Config.Mounts.
func (a *API) Mounts() []api.Mount {
	return []api.Mount{
		{Pattern: "POST /v1/admin/benchmark", JSONBody: true, Handler: a.postBenchmark},
		{Pattern: "GET /v1/admin/benchmark", Handler: a.listBenchmarks},
		{Pattern: "GET /v1/admin/benchmark/{id}", Handler: a.getBenchmark},
		{Pattern: "GET /v1/admin/benchmark/{id}/report", Handler: a.benchmarkReport},
		{Pattern: "DELETE /v1/admin/benchmark/{id}/tenants", Handler: a.purgeBenchmark},
	}
}

// postBenchmark starts a run: 202 with the run and its URL.
func (a *API) postBenchmark(w http.ResponseWriter, r *http.Request) error {
	var req bench.Request
	if err := api.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkRequest(&req); err != nil {
		return err
	}
	if a.Runner == nil {
		return api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "benchmark runs are not enabled on this server")
	}
	run, err := a.Runner.Start(r.Context(), req)
	if err != nil {
		var fe *commitlayer.FieldError
		if errors.As(err, &fe) {
			return api.Errorf(http.StatusUnprocessableEntity, CodeInvalidBenchmark, "%s", fe.Error())
		}
		return fmt.Errorf("start benchmark: %w", err)
	}
	v := viewRun(run, false)
	w.Header().Set("Location", v.URL)
	api.WriteJSON(w, http.StatusAccepted, v)
	return nil
}

func (a *API) listBenchmarks(w http.ResponseWriter, r *http.Request) error {
	runs, err := a.Runs.ListBenchmarkRuns(r.Context())
	if err != nil {
		return fmt.Errorf("list benchmark runs: %w", err)
	}
	out := make([]RunView, 0, len(runs))
	for _, b := range runs {
		out = append(out, viewRun(b, false))
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"runs": out})
	return nil
}

func (a *API) getBenchmark(w http.ResponseWriter, r *http.Request) error {
	run, err := a.run(r)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, viewRun(run, true))
	return nil
}

// benchmarkReport answers a run's HTML report: the summary, the
// oracle-versus-CommitLayer table, charts and every row, in one page.
func (a *API) benchmarkReport(w http.ResponseWriter, r *http.Request) error {
	run, err := a.run(r)
	if err != nil {
		return err
	}
	if a.Reports == nil {
		return api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "reports are not enabled on this server")
	}
	page, err := a.Reports.Render(run)
	if err != nil {
		return fmt.Errorf("render report of %s: %w", run.ID, err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	// The page is self-contained: nothing to load, nothing to run.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page)
	return nil
}

// purgeBenchmark deletes the tenants a finished run created, with all their
// data; the run's own results stay. A running run is 409.
func (a *API) purgeBenchmark(w http.ResponseWriter, r *http.Request) error {
	run, err := a.run(r)
	if err != nil {
		return err
	}
	if run.Status == "running" {
		return api.Errorf(http.StatusConflict, CodeBenchmarkRunning, "benchmark run %s is still running; purge it when it is done", run.ID)
	}
	n, err := a.Runs.PurgeBenchmarkTenants(r.Context(), run.ID)
	if err != nil {
		return fmt.Errorf("purge benchmark tenants: %w", err)
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"id": run.ID, "purged_tenants": n})
	return nil
}

// run loads the run named in the path: 404 when there is none by that id.
func (a *API) run(r *http.Request) (benchstore.Run, error) {
	id := r.PathValue("id")
	if !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return benchstore.Run{}, api.Errorf(http.StatusNotFound, api.CodeNotFound, "no benchmark run %q", shorten(id))
	}
	run, err := a.Runs.GetBenchmarkRun(r.Context(), id)
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		return run, api.Errorf(http.StatusNotFound, api.CodeNotFound, "no benchmark run %q", shorten(id))
	case err != nil:
		return run, fmt.Errorf("get benchmark run: %w", err)
	}
	return run, nil
}

// shorten cuts an id echoed in an answer to 128 bytes, on a rune boundary.
func shorten(s string) string {
	if len(s) <= 128 {
		return s
	}
	n := 128
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
