package workflows

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

	"github.com/commitlayer/commitlayer/activities"
)

func pollEnv(t *testing.T, open []int) (*testsuite.TestWorkflowEnvironment, *int) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	checks := 0
	env.OnActivity(act.OpenVerifications, mock.Anything, mock.Anything).Return(func(context.Context, string) (int, error) {
		n := open[min(checks, len(open)-1)]
		checks++
		return n, nil
	})
	pulls := 0
	env.OnActivity(act.Extract, mock.Anything, mock.Anything).Return(func(context.Context, activities.ExtractInput) (activities.ExtractResult, error) {
		pulls++
		return activities.ExtractResult{}, nil
	})
	return env, &pulls
}

func TestPollConnectorsPullsWhileVerificationsWatch(t *testing.T) {
	env, pulls := pollEnv(t, []int{3, 2, 1, 0})
	start := env.Now()
	env.ExecuteWorkflow(PollConnectors, PollConnectorsInput{TenantID: "t_1", Interval: 30 * time.Second})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var polls int
	require.NoError(t, env.GetWorkflowResult(&polls))
	require.Equal(t, 3, polls)
	require.Equal(t, 3, *pulls)
	// Four intervals: three pulls, then the check that found nothing open.
	require.Equal(t, 2*time.Minute, env.Now().Sub(start).Round(time.Second))
}

func TestPollConnectorsContinuesAsNew(t *testing.T) {
	env, pulls := pollEnv(t, []int{1})
	env.ExecuteWorkflow(PollConnectors, PollConnectorsInput{TenantID: "t_1", Interval: time.Minute, Polls: 7})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "%v", env.GetWorkflowError())
	require.Equal(t, pollsPerRun, *pulls)
}

func TestPollConnectorsRequiresTenant(t *testing.T) {
	env, _ := pollEnv(t, []int{0})
	env.ExecuteWorkflow(PollConnectors, PollConnectorsInput{})
	require.Error(t, env.GetWorkflowError())
}
