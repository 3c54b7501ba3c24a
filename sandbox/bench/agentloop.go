package bench

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/llmtemporal"
	"github.com/commitlayer/commitlayer/llm/loop"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// The model-driven agent's durable loop: the conversation (llm/loop) lives
// in the Scenario workflow's state; each model turn is an activity on any
// worker (llmtemporal's retry policy: 429, 5xx and timeouts retried, 4xx,
// bad keys and malformed output not), each tool call an activity on the
// scenario's own worker through its chaos. Both write ahead, so a worker
// that stops mid-conversation repeats neither a tool call nor a billed
// turn (harness.Activities.ModelTurn, AgentToolCall).

// changeLLMAgent versions the model-driven path. Only runs started with an
// agent take it (ScenarioInput.Agent), so histories recorded before it
// replay unchanged.
const changeLLMAgent = "llm-agent-loop"

// changeCallsBesideReport runs the calls a model sends beside
// report_result before the report is taken (loop.Config.CallsBesideReport);
// runs recorded before it drop them, and replay so.
const changeCallsBesideReport = "llm-calls-beside-report"

// turnTimeout bounds one model turn attempt.
const turnTimeout = 3 * time.Minute

// runModelAgent runs the scenario's task with the model-driven agent and
// records its action; a conversation that ends without a report (an agent
// error, the turn limit, the budget) still records the action, claiming
// failure, and its row says why.
func (s *scenarioRun) runModelAgent(ctx, local workflow.Context) (harness.AgentResult, error) {
	workflow.GetVersion(ctx, changeLLMAgent, workflow.DefaultVersion, 1)
	spec, err := s.in.Agent.Normalize()
	if err != nil {
		return harness.AgentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, nil)
	}
	var start harness.AgentStart
	if err := workflow.ExecuteActivity(local, harnessActs.StartAgent, harness.StartAgentInput{StepInput: s.step, Agent: spec}).
		Get(ctx, &start); err != nil {
		return harness.AgentResult{}, fmt.Errorf("start agent: %w", err)
	}
	beside := workflow.GetVersion(ctx, changeCallsBesideReport, workflow.DefaultVersion, 1) >= 1
	conv, err := loop.New(loop.Config{Provider: spec.Provider, System: start.System, Tools: start.Tools,
		MaxTurns: spec.MaxTurns, MaxTokens: spec.MaxTokens, CallsBesideReport: beside}, start.Task)
	if err != nil {
		return harness.AgentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, nil)
	}
	turnCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: turnTimeout,
		RetryPolicy:         llmtemporal.RetryPolicy(),
	})
	toolCtx := workflow.WithActivityOptions(local, workflow.ActivityOptions{
		TaskQueue:              s.prep.TaskQueue,
		ScheduleToStartTimeout: time.Minute,
		// A tool call's HTTP attempt is bounded at 10 s by its client.
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrInvalidInput, "ScenarioLost"}},
	})
	budget := llm.Budget{Limit: s.in.TokenBudget}
	calls := 0
	for !conv.Done {
		if err := budget.Check(); err != nil {
			conv.Abort(err)
			break
		}
		req, err := conv.Request()
		if err != nil {
			conv.Abort(err)
			break
		}
		req.MaxTokens = budget.MaxTokens(req.MaxTokens)
		var resp llm.Response
		err = workflow.ExecuteActivity(turnCtx, harnessActs.ModelTurn, harness.ModelTurnInput{
			RunID: s.in.RunID, ScenarioID: s.in.ScenarioID, Index: conv.Turns,
			Provider: spec.Provider, Model: spec.Model, Request: req,
		}).Get(ctx, &resp)
		if err != nil {
			conv.Abort(turnError(conv.Turns+1, err))
			break
		}
		budget.Charge(resp.Usage)
		// llm/loop is plain data: workflowcheck sees encoding/json (whose
		// output sorts map keys) and a map copied into another; no decision
		// follows map order, no clock, no I/O.
		next, err := conv.Step(resp) //workflowcheck:ignore
		if err != nil {
			conv.Abort(err)
			break
		}
		for _, call := range next.Calls {
			var at llm.Attempt
			if err := workflow.ExecuteActivity(toolCtx, harnessActs.AgentToolCall, harness.ToolCallInput{
				StepInput: s.step, Index: calls, Call: call,
			}).Get(ctx, &at); err != nil {
				return harness.AgentResult{}, fmt.Errorf("tool call %d (%s): %w", calls+1, call.Name, err)
			}
			calls++
			//workflowcheck:ignore (plain data, as Step above)
			if err := conv.Record(call, at); err != nil {
				return harness.AgentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, nil)
			}
		}
	}
	var res harness.AgentResult
	if err := workflow.ExecuteActivity(local, harnessActs.FinishAgent, harness.FinishAgentInput{
		StepInput: s.step, Trajectory: conv.Trajectory,
	}).Get(ctx, &res); err != nil {
		return harness.AgentResult{}, fmt.Errorf("finish agent: %w", err)
	}
	return res, nil
}

// turnError names a turn that failed for good by its llm.ErrorKind and the
// provider's message (which never holds a key).
func turnError(turn int, err error) error {
	var ae *temporal.ApplicationError
	if kind := llmtemporal.KindOf(err); kind != "" && errors.As(err, &ae) {
		return fmt.Errorf("turn %d failed (%s): %s", turn, kind, ae.Error())
	}
	return fmt.Errorf("turn %d failed: %w", turn, err)
}

// notRunReason is the error of a row the run's token budget left out.
const notRunReason = "not run: the run's token budget was spent"

// budgetState is a model-driven run's token budget across its scenarios.
type budgetState struct {
	limit  int64
	notRun map[string]bool
}

func newBudgetState(in BenchmarkInput) budgetState {
	b := budgetState{notRun: map[string]bool{}}
	if in.Agent != nil {
		b.limit = in.Agent.TokenBudget
	}
	for _, id := range in.NotRun {
		b.notRun[id] = true
	}
	return b
}

// spent is the run's token budget with what the finished rows used.
func (b budgetState) spent(rows []matrix.Row, done []bool) llm.Budget {
	bud := llm.Budget{Limit: b.limit}
	for i, r := range rows {
		if done[i] && r.LLM != nil {
			bud.Used += r.LLM.Tokens()
		}
	}
	return bud
}
