package benchapi

import (
	"encoding/json"
	"time"

	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

// RunView is a benchmark run on the wire (BenchmarkRun in openapi.json),
// as the routes answer it and Client reads it. Results, Markdown and
// LogTail come only with one run (GET /v1/admin/benchmark/{id}).
type RunView struct {
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

// viewRun shows a run; full adds the per-scenario results, the markdown and
// the log tail.
func viewRun(b benchstore.Run, full bool) RunView {
	v := RunView{
		ID: b.ID, Status: b.Status, Request: rawOrNull(b.Request), Summary: rawOrNull(b.Summary),
		TenantID: b.TenantID, StartedAt: b.StartedAt, URL: "/v1/admin/benchmark/" + b.ID,
	}
	if !b.FinishedAt.IsZero() {
		f := b.FinishedAt.UTC()
		v.FinishedAt = &f
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
