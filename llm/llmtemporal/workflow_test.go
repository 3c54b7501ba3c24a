package llmtemporal_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/llm/llmtemporal"
	"github.com/commitlayer/commitlayer/llm/loop"
)

// activities holds what the turn and tool activities need.
type activities struct {
	provider llm.Provider
	calls    int
}

func (a *activities) Turn(ctx context.Context, req llm.Request) (llm.Response, error) {
	return llmtemporal.Turn(ctx, a.provider, req)
}

func (a *activities) Tool(_ context.Context, call llm.ToolCall) (llm.Attempt, error) {
	a.calls++
	return llm.Attempt{Status: 200, Response: `{"ok":true}`}, nil
}

var tools = []llm.Tool{{Name: "refund", Schema: json.RawMessage(
	`{"type":"object","properties":{"order_id":{"type":"string"},"idempotency_key":{"type":"string"}}}`)}}

// agent is the pattern the Scenario workflow follows: the conversation in
// the workflow's state, each turn and each tool call an activity.
func agent(ctx workflow.Context, task string) (llm.Trajectory, error) {
	var a *activities
	c, err := loop.New(loop.Config{Provider: "test", Tools: tools, MaxTurns: 5}, task)
	if err != nil {
		return llm.Trajectory{}, temporal.NewNonRetryableApplicationError(err.Error(), "bad_task", nil)
	}
	turnCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: llmtemporal.RetryPolicy()})
	toolCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	for {
		req, err := c.Request()
		if err != nil {
			c.Abort(err)
			return c.Trajectory, nil
		}
		var resp llm.Response
		if err := workflow.ExecuteActivity(turnCtx, a.Turn, req).Get(ctx, &resp); err != nil {
			c.Abort(err)
			return c.Trajectory, nil
		}
		next, err := c.Step(resp)
		if err != nil {
			c.Abort(err)
			return c.Trajectory, nil
		}
		if next.Report != nil {
			return c.Trajectory, nil
		}
		for _, call := range next.Calls {
			var at llm.Attempt
			if err := workflow.ExecuteActivity(toolCtx, a.Tool, call).Get(ctx, &at); err != nil {
				return llm.Trajectory{}, err
			}
			if err := c.Record(call, at); err != nil {
				return llm.Trajectory{}, err
			}
		}
	}
}

func run(t *testing.T, faults ...fake.Fault) (llm.Trajectory, *fake.Server, *activities) {
	srv, prov, err := fake.New(llm.OpenAI, fake.NewModel(fake.Careful))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.Inject(faults...)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts := &activities{provider: prov}
	env.RegisterActivity(acts)
	env.RegisterWorkflow(agent)
	plan := fake.Plan{Steps: []fake.Step{{Tool: "refund", Args: map[string]any{"order_id": "o_1"}}}, Report: "Refunded."}
	env.ExecuteWorkflow(agent, "Refund o_1.\n"+plan.Text())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var tr llm.Trajectory
	require.NoError(t, env.GetWorkflowResult(&tr))
	return tr, srv, acts
}

func TestAgentLoopInAWorkflow(t *testing.T) {
	tr, srv, acts := run(t, fake.Fault{Status: 429, RetryAfter: time.Second})
	require.Equal(t, llm.Report{Status: "success", Message: "Refunded."}, tr.Report)
	require.Len(t, tr.Calls, 1)
	require.Equal(t, 1, acts.calls)
	require.NotEmpty(t, tr.Calls[0].Args["idempotency_key"])
	// The 429 turn was retried by Temporal: three requests for two turns.
	require.Len(t, srv.Requests(), 3)
	require.Equal(t, 429, srv.Requests()[0].Status)
}

func TestAgentLoopRecordsAnAgentError(t *testing.T) {
	tr, srv, acts := run(t, fake.Fault{Malformed: true})
	require.Empty(t, tr.Report.Status)
	require.Contains(t, tr.Error, "malformed")
	require.Zero(t, acts.calls)
	require.Len(t, srv.Requests(), 1, "a malformed answer is not retried")
}
