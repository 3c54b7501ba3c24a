package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
)

// MaxRepeat bounds --repeat (pass^k).
const MaxRepeat = 10

// checkRepeatAndJudge refuses a repeat out of range and a judge that names
// no provider (field errors: 422 on the API).
func checkRepeatAndJudge(req Request) error {
	if req.Repeat < 0 || req.Repeat > MaxRepeat {
		return &commitlayer.FieldError{Field: "repeat", Reason: fmt.Sprintf("must be between 1 and %d", MaxRepeat)}
	}
	if req.Judge != "" {
		if _, _, err := harness.ParseJudge(req.Judge); err != nil {
			return &commitlayer.FieldError{Field: "judge", Reason: err.Error()}
		}
	}
	return checkSinks(req.Sinks)
}

// checkSinks refuses sink names the sinks package does not know.
func checkSinks(names []string) error {
	if len(names) == 0 {
		return nil
	}
	if _, err := sinks.ParseNames(strings.Join(names, ",")); err != nil {
		return &commitlayer.FieldError{Field: "sinks", Reason: err.Error()}
	}
	return nil
}

// replaySource is what a replay needs of the recorded run.
type replaySource struct {
	ids      []string // rows with a trajectory, in order
	skipped  int      // rows without one
	payments string
}

// loadReplaySource reads a recorded run for a replay; its errors are field
// errors on replay_of.
func (r *Runner) loadReplaySource(ctx context.Context, runID string) (replaySource, error) {
	fe := func(format string, args ...any) error {
		return &commitlayer.FieldError{Field: "replay_of", Reason: fmt.Sprintf(format, args...)}
	}
	src, err := r.Store.GetBenchmarkRun(ctx, runID)
	if errors.Is(err, commitlayer.ErrNotFound) {
		return replaySource{}, fe("no benchmark run %q", runID)
	} else if err != nil {
		return replaySource{}, fmt.Errorf("load run %s: %w", runID, err)
	}
	if src.Status == "running" {
		return replaySource{}, fe("run %s is still running; replay it when it is done", runID)
	}
	rows, err := harness.RecordedRows(src.Results)
	if err != nil {
		return replaySource{}, fe("run %s: %v", runID, err)
	}
	var out replaySource
	for _, row := range rows {
		if row.Trajectory == nil {
			out.skipped++
			continue
		}
		if _, ok := catalogue.Lookup(row.ID); !ok {
			return replaySource{}, fe("run %s has a row for %q, which is not a scenario of this build", runID, row.ID)
		}
		out.ids = append(out.ids, row.ID)
	}
	if len(out.ids) == 0 {
		return replaySource{}, fe("run %s recorded no trajectory to replay (%d rows)", runID, len(rows))
	}
	var req struct {
		Payments string `json:"payments"`
	}
	_ = json.Unmarshal(src.Request, &req) // an imported file's request may name none
	out.payments = inputPayments(req.Payments)
	return out, nil
}

// startReplay stores a run and starts its Replay workflow over the
// recorded run's rows (the request checked by replayAgent.Check).
func (r *Runner) startReplay(ctx context.Context, req Request) (benchstore.Run, client.WorkflowRun, error) {
	conc, err := r.concurrency(req.Concurrency)
	if err != nil {
		return benchstore.Run{}, nil, err
	}
	if err := checkSinks(req.Sinks); err != nil {
		return benchstore.Run{}, nil, err
	}
	src, err := r.loadReplaySource(ctx, req.ReplayOf)
	if err != nil {
		return benchstore.Run{}, nil, err
	}
	runID := newRunID()
	reqJSON, err := json.Marshal(struct {
		ReplayOf    string   `json:"replay_of"`
		Concurrency int      `json:"concurrency"`
		Scenarios   []string `json:"scenarios"`
		Skipped     int      `json:"skipped,omitempty"`
		Payments    string   `json:"payments,omitempty"`
	}{req.ReplayOf, conc, src.ids, src.skipped, src.payments})
	if err != nil {
		return benchstore.Run{}, nil, fmt.Errorf("encode run request: %w", err)
	}
	summary := fmt.Sprintf("replay %s of run %s: %d scenarios, %d at a time", runID, req.ReplayOf, len(src.ids), conc)
	return r.launch(ctx, reqJSON, "Replay", Replay, summary, BenchmarkInput{RunID: runID, ScenarioIDs: src.ids,
		Concurrency: conc, Payments: src.payments, ReplayOf: req.ReplayOf, Sinks: req.Sinks})
}

// ImportResults stores a results file's rows (latest.json) as a finished
// run, so it can be replayed by id: `commitlayer sandbox -replay FILE`.
// The run's request names the file it came from.
func (r *Runner) ImportResults(ctx context.Context, source string, res matrix.Results) (benchstore.Run, error) {
	if len(res.Scenarios) == 0 {
		return benchstore.Run{}, fmt.Errorf("import %s: no scenarios", source)
	}
	rows, err := json.Marshal(res.Scenarios)
	if err != nil {
		return benchstore.Run{}, fmt.Errorf("import %s: %w", source, err)
	}
	summary, err := json.Marshal(res.Summary)
	if err != nil {
		return benchstore.Run{}, fmt.Errorf("import %s: %w", source, err)
	}
	reqJSON, err := json.Marshal(struct {
		ImportedFrom string `json:"imported_from"`
		Commit       string `json:"commit"`
		Payments     string `json:"payments"`
	}{source, res.Commit, res.PaymentsBackend})
	if err != nil {
		return benchstore.Run{}, fmt.Errorf("import %s: %w", source, err)
	}
	now := time.Now().UTC()
	run, err := r.Store.CreateBenchmarkRun(ctx, benchstore.Run{ID: newRunID(), Status: "running", Request: reqJSON, StartedAt: now})
	if err != nil {
		return benchstore.Run{}, fmt.Errorf("import %s: store run: %w", source, err)
	}
	run.Status, run.Results, run.Summary, run.FinishedAt = "imported", rows, summary, now
	run.LogTail = fmt.Sprintf("imported from %s (commit %s): %d scenarios\n", source, res.Commit, len(res.Scenarios))
	if err := r.Store.UpdateBenchmarkRun(ctx, run); err != nil {
		return benchstore.Run{}, fmt.Errorf("import %s: %w", source, err)
	}
	return run, nil
}
