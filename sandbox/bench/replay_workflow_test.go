package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

func TestAttemptOf(t *testing.T) {
	ids := []string{"a", "a", "a", "b", "c", "c"}
	var got []int
	for i := range ids {
		got = append(got, attemptOf(ids, i))
	}
	require.Equal(t, []int{1, 2, 3, 0, 1, 2}, got)
	require.Equal(t, "benchmark/r/a", ScenarioAttemptWorkflowID("r", "a", 0))
	require.Equal(t, "benchmark/r/a", ScenarioAttemptWorkflowID("r", "a", 1))
	require.Equal(t, "benchmark/r/a/attempt-2", ScenarioAttemptWorkflowID("r", "a", 2))
}

// replayEnv runs Benchmark or Replay with Scenario children replaced by a
// stand-in that records each child's workflow id and input.
func replayEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *[]string, *[]ScenarioInput) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	harness.Register(env, &harness.Activities{})
	env.RegisterWorkflow(Scenario)
	env.RegisterWorkflow(Replay)
	var wfIDs []string
	var inputs []ScenarioInput
	env.OnWorkflow(Scenario, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in ScenarioInput) (matrix.Row, error) {
		wfIDs = append(wfIDs, workflow.GetInfo(ctx).WorkflowExecution.ID)
		inputs = append(inputs, in)
		return matrix.Row{ID: in.ScenarioID, Attempt: in.Attempt, Agree: matrix.Agree{Outcome: true, Policy: true}}, nil
	})
	env.OnActivity(harnessActs.RecordRun, mock.Anything, mock.Anything).Return(func(_ context.Context, in harness.RunInput) (matrix.Summary, error) {
		return report.Summarize(in.Rows), nil
	})
	return env, &wfIDs, &inputs
}

// A repeated id is its next attempt: its own child workflow id and
// attempt number; the judge's name (never a key) reaches each child.
func TestBenchmarkRepeatsAttempts(t *testing.T) {
	env, wfIDs, inputs := replayEnv(t)
	env.ExecuteWorkflow(Benchmark, BenchmarkInput{RunID: "rk", ScenarioIDs: []string{"s/1", "s/1", "s/2", "s/2"}, Concurrency: 1, Judge: "anthropic"})
	require.NoError(t, env.GetWorkflowError())
	var res BenchmarkResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, []string{"benchmark/rk/s/1", "benchmark/rk/s/1/attempt-2", "benchmark/rk/s/2", "benchmark/rk/s/2/attempt-2"}, *wfIDs)
	for i, in := range *inputs {
		require.Equal(t, i%2+1, in.Attempt)
		require.Equal(t, "anthropic", in.Judge)
		require.Empty(t, in.ReplayOf)
	}
	require.Len(t, res.Summary.PassK, 2, "s/1's workflow and all")
}

// Replay is Benchmark with the recorded run on every child, and a long
// replay continues as Replay.
func TestReplayWorkflow(t *testing.T) {
	env, _, inputs := replayEnv(t)
	env.ExecuteWorkflow(Replay, BenchmarkInput{RunID: "rr", ScenarioIDs: ids(3), Concurrency: 2, ReplayOf: "r0"})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, *inputs, 3)
	for _, in := range *inputs {
		require.Equal(t, "r0", in.ReplayOf)
		require.Zero(t, in.Attempt)
	}

	env, _, _ = replayEnv(t)
	env.ExecuteWorkflow(Replay, BenchmarkInput{RunID: "rr2", ScenarioIDs: ids(scenariosPerRun + 2), Concurrency: 8, ReplayOf: "r0"})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "%v", env.GetWorkflowError())
	require.Equal(t, "Replay", can.WorkflowType.Name)
	var next BenchmarkInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, "r0", next.ReplayOf)

	env, _, _ = replayEnv(t)
	env.ExecuteWorkflow(Replay, BenchmarkInput{RunID: "rr3", ScenarioIDs: ids(1)})
	require.ErrorContains(t, env.GetWorkflowError(), "the recorded run is required")
}

// The Scenario workflow replays through ReplayAgent instead of RunAgent,
// and adds the model judge's verdict, UNKNOWN when the judge fails for
// good; a replay asks no judge.
func TestScenarioReplayAndJudgeSteps(t *testing.T) {
	tr := &llm.Trajectory{Instruction: "x", Report: llm.Report{Status: commitlayer.ClaimSuccess}}
	for _, tc := range []struct {
		name     string
		in       ScenarioInput
		judgeErr error
		want     []string // judge verdicts on the row
	}{
		{"agent with judge", ScenarioInput{RunID: "r", ScenarioID: "s/1", Judge: "anthropic"}, nil, []string{"PASS", "FAIL"}},
		{"judge fails", ScenarioInput{RunID: "r", ScenarioID: "s/1", Judge: "anthropic"}, errors.New("no key"), []string{"PASS", "UNKNOWN"}},
		{"replay", ScenarioInput{RunID: "r", ScenarioID: "s/1", ReplayOf: "r0", Judge: "anthropic"}, nil, []string{"PASS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			env := suite.NewTestWorkflowEnvironment()
			harness.Register(env, &harness.Activities{})
			env.OnActivity(harnessActs.Prepare, mock.Anything, mock.Anything).Return(harness.PrepareResult{TaskQueue: "default-test-taskqueue", TenantID: "t1"}, nil)
			env.OnActivity(harnessActs.RunPrior, mock.Anything, mock.Anything).Return([]harness.Recorded{}, nil)
			ran, replayed := 0, 0
			agentRes := harness.AgentResult{Recorded: harness.Recorded{}, Claim: "success"}
			env.OnActivity(harnessActs.RunAgent, mock.Anything, mock.Anything).Return(func(context.Context, harness.StepInput) (harness.AgentResult, error) {
				ran++
				return agentRes, temporal.NewNonRetryableApplicationError("stop here", "ScenarioLost", nil)
			}).Maybe()
			env.OnActivity(harnessActs.ReplayAgent, mock.Anything, mock.Anything).Return(func(_ context.Context, in harness.ReplayInput) (harness.AgentResult, error) {
				replayed++
				require.Equal(t, "r0", in.Of)
				return agentRes, temporal.NewNonRetryableApplicationError("stop here", "ScenarioLost", nil)
			}).Maybe()
			env.OnActivity(harnessActs.Cleanup, mock.Anything, mock.Anything).Return(nil)
			env.ExecuteWorkflow(Scenario, tc.in)
			require.ErrorContains(t, env.GetWorkflowError(), "stop here")
			if tc.in.ReplayOf != "" {
				require.Equal(t, [2]int{0, 1}, [2]int{ran, replayed})
			} else {
				require.Equal(t, [2]int{1, 0}, [2]int{ran, replayed})
			}

			// finishRow on its own: the judge step.
			env2 := suite.NewTestWorkflowEnvironment()
			harness.Register(env2, &harness.Activities{})
			env2.OnActivity(harnessActs.ModelJudge, mock.Anything, mock.Anything).Return(func(_ context.Context, in harness.ModelJudgeInput) (matrix.JudgeVerdict, error) {
				require.Equal(t, "anthropic", in.Judge)
				if tc.judgeErr != nil {
					return matrix.JudgeVerdict{}, tc.judgeErr
				}
				return matrix.JudgeVerdict{Name: "model:anthropic/x", Verdict: "FAIL", Reason: "r"}, nil
			}).Maybe()
			wf := func(ctx workflow.Context) (matrix.Row, error) {
				s := &scenarioRun{in: tc.in}
				return s.finishRow(ctx, matrix.Row{ID: "s/1", Trajectory: tr, Judges: []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS"}}})
			}
			env2.RegisterWorkflow(wf)
			env2.ExecuteWorkflow(wf)
			require.NoError(t, env2.GetWorkflowError())
			var row matrix.Row
			require.NoError(t, env2.GetWorkflowResult(&row))
			var got []string
			for _, j := range row.Judges {
				got = append(got, string(j.Verdict))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// The report route shows a stored replay's figures and links each attempt
// of a repeated scenario to its own workflow.
func TestReportsRenderReplayAndRepeat(t *testing.T) {
	row := matrix.Row{ID: "refund/baseline", Process: "refund", Agree: matrix.Agree{Outcome: true, Policy: true},
		Replay: &matrix.RowReplay{Of: "r0", Calls: 5}}
	rows, err := json.Marshal([]matrix.Row{row})
	require.NoError(t, err)
	page, err := Reports{}.Render(benchstore.Run{ID: "r1", Status: "done", Results: rows})
	require.NoError(t, err)
	require.Contains(t, string(page), "r0")
	require.Contains(t, string(page), "5, 0 answered differently from the recording")

	a1, a2 := row, row
	a1.Replay, a2.Replay = nil, nil
	a1.Attempt, a2.Attempt = 1, 2
	res := report.NewResults("", time.Unix(0, 0), time.Unix(9, 0), 1, []matrix.Row{a1, a2})
	summary, err := json.Marshal(res.Summary)
	require.NoError(t, err)
	rows, err = json.Marshal(res.Scenarios)
	require.NoError(t, err)
	page, err = Reports{}.Render(benchstore.Run{ID: "r2", Status: "done", Summary: summary, Results: rows})
	require.NoError(t, err)
	require.Contains(t, string(page), "k = 2")
	require.Contains(t, string(page), url.PathEscape(ScenarioAttemptWorkflowID("r2", "refund/baseline", 2)))
}
