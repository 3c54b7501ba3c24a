package bench

import (
	"encoding/json"
	"fmt"

	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// Reports renders stored benchmark runs as the sandbox's HTML report, for
// the API's GET /v1/admin/benchmark/{id}/report.
type Reports struct {
	// TemporalUI is the base of the rows' workflow links; empty: the
	// report's default (the local dev server's UI).
	TemporalUI string
	Namespace  string
}

// Render builds the page from the run's stored summary and rows.
func (rp Reports) Render(run benchstore.Run) ([]byte, error) {
	r := matrix.Results{ID: run.ID, StartedAt: run.StartedAt, FinishedAt: run.FinishedAt}
	if !run.FinishedAt.IsZero() {
		r.WallSeconds = run.FinishedAt.Sub(run.StartedAt).Seconds()
	}
	if len(run.Summary) > 0 && string(run.Summary) != "null" {
		if err := json.Unmarshal(run.Summary, &r.Summary); err != nil {
			return nil, fmt.Errorf("report: summary of %s: %w", run.ID, err)
		}
	}
	if len(run.Results) > 0 && string(run.Results) != "null" {
		if err := json.Unmarshal(run.Results, &r.Scenarios); err != nil {
			return nil, fmt.Errorf("report: rows of %s: %w", run.ID, err)
		}
	}
	for i := range r.Scenarios {
		if r.Scenarios[i].WorkflowID == "" {
			// Each row links to its Scenario workflow (deterministic ids).
			r.Scenarios[i].WorkflowID = ScenarioAttemptWorkflowID(run.ID, r.Scenarios[i].ID, r.Scenarios[i].Attempt)
		}
	}
	reportExtras(run, &r)
	return report.HTML(r, report.Options{TemporalUI: rp.TemporalUI, Namespace: rp.Namespace})
}
