package bench

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// Replay re-executes a recorded run: one Scenario child per recorded row,
// each on a fresh enterprise under the same chaos rules, the recorded tool
// calls sent again in order in place of the agent (no model is called), the
// recorded report as the claim, then extraction, verification on the
// current engine and the oracle, as in Benchmark. The model judges'
// verdicts are carried over; each row says how many recorded calls
// answered differently (RowReplay). In the Temporal UI a replay is a parent
// workflow of type Replay with its children. in.ReplayOf names the recorded
// run; ScenarioIDs are its rows' ids in order (a repeated id is its next
// attempt).
func Replay(ctx workflow.Context, in BenchmarkInput) (BenchmarkResult, error) {
	if in.ReplayOf == "" {
		return BenchmarkResult{}, temporal.NewNonRetryableApplicationError("replay: the recorded run is required", activities.ErrInvalidInput, nil)
	}
	return Benchmark(ctx, in)
}

// continueAs is the workflow a long run continues as: Replay for a replay,
// else Benchmark.
func continueAs(in BenchmarkInput) any {
	if in.ReplayOf != "" {
		return Replay
	}
	return Benchmark
}

// attemptOf numbers the i-th scenario of a run among the runs of its id:
// 1 for the first, 2 for the second (--repeat); 0 when the run has it
// once.
func attemptOf(ids []string, i int) int {
	n, total := 0, 0
	for j, id := range ids {
		if id == ids[i] {
			total++
			if j <= i {
				n++
			}
		}
	}
	if total == 1 {
		return 0
	}
	return n
}

// ScenarioAttemptWorkflowID is the workflow ID of one attempt of a scenario:
// ScenarioWorkflowID for the first, "/attempt-N" after it for the others.
func ScenarioAttemptWorkflowID(runID, scenarioID string, attempt int) string {
	if attempt <= 1 {
		return ScenarioWorkflowID(runID, scenarioID)
	}
	return fmt.Sprintf("%s/attempt-%d", ScenarioWorkflowID(runID, scenarioID), attempt)
}

// modelJudgeTimeout bounds one model judge call (the provider's own
// timeout is shorter; retries are Temporal's).
const modelJudgeTimeout = 3 * time.Minute

// finishRow numbers a repeated scenario's row and adds the model judge's
// verdict when the run asked for one (a replay carries the recorded one
// over instead). A judge that cannot answer is UNKNOWN on the row; it never
// fails the scenario.
func (s *scenarioRun) finishRow(ctx workflow.Context, row matrix.Row) (matrix.Row, error) {
	row.Attempt = s.in.Attempt
	if s.in.Judge == "" || !scenarioAgentKind(s.in).judged() || row.Trajectory == nil {
		return row, nil
	}
	jctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: modelJudgeTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, MaximumAttempts: 4,
			NonRetryableErrorTypes: []string{activities.ErrInvalidInput}},
	})
	var v matrix.JudgeVerdict
	err := workflow.ExecuteActivity(jctx, harnessActs.ModelJudge, harness.ModelJudgeInput{
		Judge: s.in.Judge, Trajectory: *row.Trajectory,
	}).Get(ctx, &v)
	if err != nil {
		v = matrix.JudgeVerdict{Name: "model:" + s.in.Judge, Verdict: commitlayer.StatusUnknown, Reason: "the judge could not answer: " + err.Error()}
	}
	row.Judges = append(row.Judges, v)
	return row, nil
}

// deliverToSinks logs a finished run to the experiment platforms it names
// (the worker reads their keys); what did not arrive is on the run's log
// tail, and the run stands whatever happened.
func deliverToSinks(ctx workflow.Context, in BenchmarkInput) {
	if len(in.Sinks) == 0 {
		return
	}
	// Version 0 (no sinks) is retired, as end-watch-children is (Scenario).
	workflow.GetVersion(ctx, "sinks-at-end", workflow.DefaultVersion, 1)
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 3 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	if err := workflow.ExecuteActivity(sctx, harnessActs.DeliverSinks, harness.SinksInput{RunID: in.RunID, Sinks: in.Sinks}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("deliver to sinks", "error", err)
	}
}

// reportExtras adds to a stored run's report what a repeat or a replay
// adds: k, the recorded run and how the replay went.
func reportExtras(run benchstore.Run, r *matrix.Results) {
	if len(r.Summary.PassK) > 0 {
		r.Repeat = r.Summary.PassK[0].K
	}
	rows, err := harness.RecordedRows(run.Results)
	if err != nil {
		return
	}
	if s := report.SummarizeReplay(rows); s != nil {
		r.ReplayOf = s.Of
		r.Replay = s
	}
}
