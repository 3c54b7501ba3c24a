package harness_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/llm/loop"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
	sbcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/service"
)

// TestModelAgentActivitiesAreIdempotent runs the model-driven agent's
// activities for one scenario outside any workflow, on the real store: a
// retried StartAgent answers the same start; a retried turn is not asked
// again; a retried tool call is not made again (the chaos transport sees
// it once), and one whose first attempt began and never recorded its
// answer is answered "outcome unknown" without a call; FinishAgent records
// the report as the claim, once.
func TestModelAgentActivitiesAreIdempotent(t *testing.T) {
	d := benchstoretest.Store(t)
	models := &harness.Models{}
	defer models.Close()
	acts := &harness.Activities{
		Store: d, Recorder: service.NewActions(d, service.NewContracts(d, 0), nil, nil, nil), Rechecker: noRecheck{},
		Contracts: sbcontracts.FS, Dir: t.TempDir(), TaskQueue: "local-q", Host: &harness.Host{},
		Models: models, AgentSteps: d,
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	do := func(fn, in, out any) error {
		val, err := env.ExecuteActivity(fn, in)
		if err != nil {
			return err
		}
		return val.Get(out)
	}
	run := "llm-" + time.Now().UTC().Format("150405.000000")
	const sc = "refund/lost_response_retry_with_key"
	var prep harness.PrepareResult
	require.NoError(t, do(acts.Prepare, harness.PrepareInput{RunID: run, ScenarioID: sc}, &prep))
	step := harness.StepInput{RunID: run, ScenarioID: sc, TenantID: prep.TenantID}
	defer func() { _, _ = env.ExecuteActivity(acts.Cleanup, step) }()

	spec := agent.Spec{Provider: agent.FakeAnthropic}
	var start, again harness.AgentStart
	require.NoError(t, do(acts.StartAgent, harness.StartAgentInput{StepInput: step, Agent: spec}, &start))
	require.NoError(t, do(acts.StartAgent, harness.StartAgentInput{StepInput: step, Agent: spec}, &again))
	require.Equal(t, start, again)
	require.Contains(t, start.Task, "Refund 2500 USD on order o_1001")
	require.Contains(t, start.Task, fake.PlanOpen)
	require.Contains(t, start.Task, `"use_key":true`, "the careful temperament of a retry-with-key profile")

	// A turn, asked twice: the fake serves it once.
	conv, err := loop.New(loop.Config{Provider: spec.Provider, System: start.System, Tools: start.Tools}, start.Task)
	require.NoError(t, err)
	req, err := conv.Request()
	require.NoError(t, err)
	turn := harness.ModelTurnInput{RunID: run, ScenarioID: sc, Index: 0, Provider: spec.Provider, Model: "fake-anthropic", Request: req}
	var r1, r2 llm.Response
	require.NoError(t, do(acts.ModelTurn, turn, &r1))
	require.NoError(t, do(acts.ModelTurn, turn, &r2))
	require.Equal(t, r1, r2)
	require.Len(t, models.FakeRequests(spec.Provider), 1, "a retried turn is not billed again")
	require.Equal(t, "get_order", r1.ToolCalls[0].Name)

	// The refund: its response is lost (the scenario's chaos); the retried
	// activity answers the recorded attempt without calling again.
	refund := llm.ToolCall{ID: "toolu_1", Name: "refund",
		Args: json.RawMessage(`{"order_id":"o_1001","amount":2500,"currency":"USD","reason":"requested_by_customer","idempotency_key":"k-1"}`)}
	in := harness.ToolCallInput{StepInput: step, Index: 0, Call: refund}
	var a1, a2 llm.Attempt
	require.NoError(t, do(acts.AgentToolCall, in, &a1))
	calls := httpCalls(t, acts, prep)
	require.NoError(t, do(acts.AgentToolCall, in, &a2))
	require.Equal(t, a1, a2)
	require.Equal(t, calls, httpCalls(t, acts, prep), "a retried tool call makes no HTTP call")
	require.Contains(t, a1.Error, "timeout")
	require.Equal(t, "k-1", a1.IdempotencyKey)
	require.Equal(t, "/payments/refunds", a1.Path)
	require.Zero(t, a1.Attempt, "the conversation numbers attempts")
	_, hasKey := a1.Args["idempotency_key"]
	require.False(t, hasKey, "the key travels as the header, not as an argument")

	// An attempt that began and never recorded its answer (its worker
	// stopped mid-call): the retry does not call again.
	hash := sha(t, refund.Name, "toolu_2", refund.Args)
	_, _, err = d.BeginAgentStep(context.Background(), run, sc, "call", 1, hash)
	require.NoError(t, err)
	var lost llm.Attempt
	require.NoError(t, do(acts.AgentToolCall, harness.ToolCallInput{StepInput: step, Index: 1,
		Call: llm.ToolCall{ID: "toolu_2", Name: refund.Name, Args: refund.Args}}, &lost))
	require.Contains(t, lost.Error, "outcome is unknown")
	require.Equal(t, calls, httpCalls(t, acts, prep))

	// A call the tool layer refuses is a 400 the model sees, not a failure.
	var bad llm.Attempt
	require.NoError(t, do(acts.AgentToolCall, harness.ToolCallInput{StepInput: step, Index: 2,
		Call: llm.ToolCall{ID: "toolu_3", Name: "get_order", Args: json.RawMessage(`{}`)}}, &bad))
	require.Equal(t, 400, bad.Status)
	require.Contains(t, bad.Response, "order_id")

	tr := llm.Trajectory{Instruction: start.Task, Calls: []llm.Attempt{a1}, Report: llm.Report{Status: "success", Message: "Refunded."}}
	var f1, f2 harness.AgentResult
	require.NoError(t, do(acts.FinishAgent, harness.FinishAgentInput{StepInput: step, Trajectory: tr}, &f1))
	require.NoError(t, do(acts.FinishAgent, harness.FinishAgentInput{StepInput: step, Trajectory: tr}, &f2))
	require.Equal(t, "success", f1.Claim)
	require.Equal(t, f1.Recorded.Action.ID, f2.Recorded.Action.ID, "recorded once")
	require.Equal(t, start.RequestedAt, f1.Recorded.Action.RequestedAt)
}

// httpCalls counts the calls that went through the agent's transport.
func httpCalls(t *testing.T, acts *harness.Activities, prep harness.PrepareResult) int {
	t.Helper()
	n := acts.Host.AgentCalls(prep.TenantID)
	require.GreaterOrEqual(t, n, 0)
	return n
}

func sha(t *testing.T, parts ...any) []byte {
	t.Helper()
	h, err := harness.RequestHash(parts...)
	require.NoError(t, err)
	return h
}
