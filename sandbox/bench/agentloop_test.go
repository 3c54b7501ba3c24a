package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// TestBenchmarkStopsWhenTheTokenBudgetIsSpent: each scenario uses 400
// tokens of a 1000-token budget, one at a time: three run (the third is
// started with 200 left and may overshoot), the rest are listed as not
// run and have no row; every child was told what it may spend.
func TestBenchmarkStopsWhenTheTokenBudgetIsSpent(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	harness.Register(env, &harness.Activities{})
	env.RegisterWorkflow(Scenario)
	var budgets []int64
	env.OnWorkflow(Scenario, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in ScenarioInput) (matrix.Row, error) {
		require.NotNil(t, in.Agent)
		budgets = append(budgets, in.TokenBudget)
		if err := workflow.Sleep(ctx, time.Minute); err != nil {
			return matrix.Row{}, err
		}
		return matrix.Row{ID: in.ScenarioID, Agree: matrix.Agree{Outcome: true, Policy: true},
			LLM: &matrix.RowLLM{InputTokens: 300, OutputTokens: 100}}, nil
	})
	var last harness.RunInput
	env.OnActivity(harnessActs.RecordRun, mock.Anything, mock.Anything).Return(func(_ context.Context, in harness.RunInput) (matrix.Summary, error) {
		last = in
		return report.Summarize(in.Rows), nil
	})
	spec := &agent.Spec{Kind: agent.KindLLM, Provider: agent.FakeAnthropic, TokenBudget: 1000}
	env.ExecuteWorkflow(Benchmark, BenchmarkInput{RunID: "b1", ScenarioIDs: ids(6), Concurrency: 1, Agent: spec})
	require.NoError(t, env.GetWorkflowError())
	var res BenchmarkResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, []int64{1000, 600, 200}, budgets)
	require.Len(t, res.Rows, 3)
	require.Equal(t, []string{"s/3", "s/4", "s/5"}, res.NotRun)
	require.Equal(t, 3, res.Summary.Scenarios, "not-run scenarios are no rows of the summary")
	require.Len(t, last.Rows, 3)
	require.Zero(t, res.Summary.Errors)
}

// TestScriptedRunsCarryNoAgent: a run without an agent starts its
// children as before (no agent, no budget in their input).
func TestScriptedRunsCarryNoAgent(t *testing.T) {
	env, _, _ := benchEnv(t, nil)
	env.ExecuteWorkflow(Benchmark, BenchmarkInput{RunID: "b2", ScenarioIDs: ids(2)})
	require.NoError(t, env.GetWorkflowError())
	var res BenchmarkResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Nil(t, res.Agent)
	require.Empty(t, res.NotRun)
}

func TestForAgent(t *testing.T) {
	all, err := catalogue.Select(nil)
	require.NoError(t, err)
	req := Request{Agent: "llm", Provider: "fake-openai"}
	kind, err := CheckAgent(&req)
	require.NoError(t, err)
	require.Equal(t, AgentLLM, kind.Name())
	spec, err := modelSpec(req)
	require.NoError(t, err)
	require.Equal(t, "fake-openai", spec.Model)
	run, skipped, err := forAgent(&spec, all)
	require.NoError(t, err)
	require.Len(t, run, len(all)-12)
	require.Len(t, skipped, 12)
	none, err := catalogue.Select([]string{"refund/no_calls_claims_success"})
	require.NoError(t, err)
	_, _, err = forAgent(&spec, none)
	var fe *commitlayer.FieldError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "only", fe.Field)
	run, skipped, err = forAgent(nil, all)
	require.NoError(t, err)
	require.Nil(t, skipped)
	require.Len(t, run, len(all))
}
