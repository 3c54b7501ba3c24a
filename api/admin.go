package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// maxBenchmarkConcurrency bounds the concurrency a run may ask for.
const maxBenchmarkConcurrency = 64

type tenantView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// APIKey is shown once, when the tenant is created.
	APIKey string `json:"api_key,omitempty"`
}

// postTenant creates a tenant: 201 {"id","name","api_key"}.
func (s *Server) postTenant(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "name: is required"))
		return
	case len(name) > 200:
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "name: is longer than 200 bytes"))
		return
	}
	if err := noNUL("name", name); err != nil {
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "%s", err.Error()))
		return
	}
	t, key, err := s.tenants.CreateTenant(r.Context(), name)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("create tenant: %w", err))
		return
	}
	writeJSON(w, http.StatusCreated, tenantView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, APIKey: key})
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := s.tenants.ListTenants(r.Context())
	if err != nil {
		s.writeError(w, r, fmt.Errorf("list tenants: %w", err))
		return
	}
	out := make([]tenantView, 0, len(ts))
	for _, t := range ts {
		out = append(out, tenantView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenants": out})
}

// benchmarkView is a benchmark run on the wire.
type benchmarkView struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	Request    json.RawMessage `json:"request"`
	Summary    json.RawMessage `json:"summary"`
	Results    json.RawMessage `json:"results,omitempty"`
	Markdown   *string         `json:"markdown,omitempty"`
	LogTail    *string         `json:"log_tail,omitempty"`
	TenantID   string          `json:"tenant_id,omitempty"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	URL        string          `json:"url"`
}

// viewBenchmark shows a run; full adds the per-scenario results, the
// markdown and the log tail.
func viewBenchmark(b commitlayer.BenchmarkRun, full bool) benchmarkView {
	v := benchmarkView{
		ID: b.ID, Status: b.Status, Request: rawOrNull(b.Request), Summary: rawOrNull(b.Summary),
		TenantID: b.TenantID, StartedAt: b.StartedAt, FinishedAt: timePtr(b.FinishedAt),
		URL: "/v1/admin/benchmark/" + b.ID,
	}
	if full {
		v.Results = rawOrNull(b.Results)
		v.Markdown, v.LogTail = &b.Markdown, &b.LogTail
	}
	return v
}

// rawOrNull passes stored JSON through, as null when absent or not JSON.
func rawOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage("null")
	}
	return b
}

// postBenchmark starts a run: 202 with the run and its URL.
func (s *Server) postBenchmark(w http.ResponseWriter, r *http.Request) {
	var req BenchmarkRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Concurrency < 0 || req.Concurrency > maxBenchmarkConcurrency {
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "concurrency: must be between 0 (default) and %d", maxBenchmarkConcurrency))
		return
	}
	for i, o := range req.Only {
		if strings.TrimSpace(o) == "" || len(o) > 200 || strings.IndexByte(o, 0) >= 0 {
			s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "only[%d]: must be a scenario id or prefix", i))
			return
		}
	}
	if len(req.Payments) > 50 || strings.IndexByte(req.Payments, 0) >= 0 {
		// The runner checks the name against the backends it knows (422).
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "payments: must be a payments backend name"))
		return
	}
	if err := checkBenchmarkAgent(&req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkBenchmarkExtras(req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.benchmarks == nil {
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable, "benchmark runs are not enabled on this server"))
		return
	}
	run, err := s.benchmarks.Start(r.Context(), req)
	if err != nil {
		var fe *commitlayer.FieldError
		if errors.As(err, &fe) {
			s.writeError(w, r, errorf(http.StatusUnprocessableEntity, codeInvalidBenchmark, "%s", fe.Error()))
			return
		}
		s.writeError(w, r, fmt.Errorf("start benchmark: %w", err))
		return
	}
	v := viewBenchmark(run, false)
	w.Header().Set("Location", v.URL)
	writeJSON(w, http.StatusAccepted, v)
}

func (s *Server) listBenchmarks(w http.ResponseWriter, r *http.Request) {
	runs, err := s.benchRuns.ListBenchmarkRuns(r.Context())
	if err != nil {
		s.writeError(w, r, fmt.Errorf("list benchmark runs: %w", err))
		return
	}
	out := make([]benchmarkView, 0, len(runs))
	for _, b := range runs {
		out = append(out, viewBenchmark(b, false))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}

func (s *Server) getBenchmark(w http.ResponseWriter, r *http.Request) {
	if run, ok := s.benchmarkRun(w, r); ok {
		writeJSON(w, http.StatusOK, viewBenchmark(run, true))
	}
}

// benchmarkReport answers a run's HTML report: the summary, the
// judge-versus-CommitLayer table, charts and every row, in one page.
func (s *Server) benchmarkReport(w http.ResponseWriter, r *http.Request) {
	run, ok := s.benchmarkRun(w, r)
	if !ok {
		return
	}
	if s.reports == nil {
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable, "reports are not enabled on this server"))
		return
	}
	page, err := s.reports.Render(run)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("render report of %s: %w", run.ID, err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	// The page is self-contained: nothing to load, nothing to run.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page)
}

// benchmarkRun loads the run named in the path, answering 404 when there is
// none by that id.
func (s *Server) benchmarkRun(w http.ResponseWriter, r *http.Request) (commitlayer.BenchmarkRun, bool) {
	id := r.PathValue("id")
	if !storable(id) {
		s.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no benchmark run %q", truncate(id, 128)))
		return commitlayer.BenchmarkRun{}, false
	}
	run, err := s.benchRuns.GetBenchmarkRun(r.Context(), id)
	switch {
	case isNotFound(err):
		s.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no benchmark run %q", truncate(id, 128)))
		return run, false
	case err != nil:
		s.writeError(w, r, fmt.Errorf("get benchmark run: %w", err))
		return run, false
	}
	return run, true
}

// purgeBenchmark deletes the tenants a finished run created, with all their
// data; the run's own results stay. A running run is 409.
func (s *Server) purgeBenchmark(w http.ResponseWriter, r *http.Request) {
	run, ok := s.benchmarkRun(w, r)
	if !ok {
		return
	}
	if run.Status == "running" {
		s.writeError(w, r, errorf(http.StatusConflict, codeBenchmarkRunning, "benchmark run %s is still running; purge it when it is done", run.ID))
		return
	}
	n, err := s.benchRuns.PurgeBenchmarkTenants(r.Context(), run.ID)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("purge benchmark tenants: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": run.ID, "purged_tenants": n})
}

// checkBenchmarkAgent checks a run's agent fields: an unknown agent or
// provider, a provider without agent llm's, or bounds out of range is 400.
func checkBenchmarkAgent(req *BenchmarkRequest) error {
	switch req.Agent {
	case "", "scripted":
		if req.Provider == "" {
			if req.Model != "" || req.MaxTurns != 0 || req.MaxTokens != 0 || req.TokenBudget != 0 {
				return errorf(http.StatusBadRequest, codeInvalidRequest, "model, max_turns, max_tokens and token_budget need agent llm and a provider")
			}
			req.Agent = ""
			return nil
		}
		if req.Agent == "scripted" {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "provider: the scripted agent takes no provider")
		}
		req.Agent = "llm"
	case "llm":
	default:
		return errorf(http.StatusBadRequest, codeInvalidRequest, "agent: must be scripted or llm")
	}
	if !slices.Contains(BenchmarkProviders, req.Provider) {
		// The value is not echoed: a key pasted in the wrong field stays out
		// of the answer and the logs.
		return errorf(http.StatusBadRequest, codeInvalidRequest, "provider: not a provider; use one of %s",
			strings.Join(BenchmarkProviders, ", "))
	}
	switch {
	case len(req.Model) > 100 || strings.ContainsAny(req.Model, "\x00\n\r"):
		return errorf(http.StatusBadRequest, codeInvalidRequest, "model: must be a model name of at most 100 characters")
	case req.MaxTurns < 0 || req.MaxTurns > 100:
		return errorf(http.StatusBadRequest, codeInvalidRequest, "max_turns: must be between 0 (default) and 100")
	case req.MaxTokens < 0 || req.MaxTokens > 32000:
		return errorf(http.StatusBadRequest, codeInvalidRequest, "max_tokens: must be between 0 (default) and 32000")
	case req.TokenBudget < 0:
		return errorf(http.StatusBadRequest, codeInvalidRequest, "token_budget: must not be negative")
	}
	return nil
}
