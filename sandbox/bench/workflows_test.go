package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// benchEnv runs Benchmark with Scenario children replaced by a stand-in
// that takes (index+1) minutes and fails for ids in fail.
func benchEnv(t *testing.T, fail map[string]bool) (*testsuite.TestWorkflowEnvironment, *int, *[]harness.RunInput) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	harness.Register(env, &harness.Activities{})
	env.RegisterWorkflow(Scenario)
	running, peak := 0, 0
	env.OnWorkflow(Scenario, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in ScenarioInput) (matrix.Row, error) {
		running++
		peak = max(peak, running)
		defer func() { running-- }()
		var i int
		_, _ = fmt.Sscanf(in.ScenarioID, "s/%d", &i)
		if err := workflow.Sleep(ctx, time.Duration(i%3+1)*time.Minute); err != nil {
			return matrix.Row{}, err
		}
		if fail[in.ScenarioID] {
			return matrix.Row{}, errors.New("enterprise lost")
		}
		return matrix.Row{ID: in.ScenarioID, Agree: matrix.Agree{Outcome: true, Policy: true},
			Verdict: matrix.Verdict{Status: commitlayer.StatusPass}}, nil
	})
	var records []harness.RunInput
	env.OnActivity(harnessActs.RecordRun, mock.Anything, mock.Anything).Return(func(_ context.Context, in harness.RunInput) (matrix.Summary, error) {
		records = append(records, in)
		return report.Summarize(in.Rows), nil
	})
	return env, &peak, &records
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s/%d", i)
	}
	return out
}

func TestBenchmarkSlidingWindowKeepsOrderAndBound(t *testing.T) {
	env, peak, records := benchEnv(t, map[string]bool{"s/4": true})
	env.ExecuteWorkflow(Benchmark, BenchmarkInput{RunID: "r1", ScenarioIDs: ids(12), Concurrency: 3})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res BenchmarkResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.LessOrEqual(t, *peak, 3, "more children than the window at once")
	require.Equal(t, 3, *peak)
	require.Len(t, res.Rows, 12)
	for i, r := range res.Rows {
		require.Equal(t, fmt.Sprintf("s/%d", i), r.ID, "rows keep the scenario order")
	}
	// A failed child is a row that disagrees, with its error.
	require.Contains(t, res.Rows[4].Error, "enterprise lost")
	require.False(t, res.Rows[4].Agree.Both())
	require.Equal(t, 1, res.Summary.Errors)
	// Progress was recorded along the way, and the final record says done.
	last := (*records)[len(*records)-1]
	require.Equal(t, "done", last.Status)
	require.Len(t, last.Rows, 12)
}

func TestBenchmarkContinuesAsNewOnLargeRuns(t *testing.T) {
	env, _, _ := benchEnv(t, nil)
	env.ExecuteWorkflow(Benchmark, BenchmarkInput{RunID: "r2", ScenarioIDs: ids(scenariosPerRun + 5), Concurrency: 8})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "%v", env.GetWorkflowError())
	var next BenchmarkInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, scenariosPerRun, next.Next)
	require.Len(t, next.Rows, scenariosPerRun)
}

func TestBenchmarkResumesAfterContinueAsNew(t *testing.T) {
	env, _, _ := benchEnv(t, nil)
	all := ids(10)
	done := make([]matrix.Row, 6)
	for i := range done {
		done[i] = matrix.Row{ID: all[i], Agree: matrix.Agree{Outcome: true, Policy: true}}
	}
	env.ExecuteWorkflow(Benchmark, BenchmarkInput{RunID: "r3", ScenarioIDs: all, Concurrency: 2, Next: 6, Rows: done})
	require.NoError(t, env.GetWorkflowError())
	var res BenchmarkResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, res.Rows, 10)
	require.Equal(t, "s/9", res.Rows[9].ID)
	require.Equal(t, 10, res.Summary.Scenarios)
}

func TestBenchmarkRejectsEmptyRun(t *testing.T) {
	env, _, _ := benchEnv(t, nil)
	env.ExecuteWorkflow(Benchmark, BenchmarkInput{RunID: "r4"})
	require.Error(t, env.GetWorkflowError())
}
