package harness

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/llmtemporal"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// The model-driven agent in the failure matrix. The Scenario workflow (in
// sandbox/bench) holds the conversation (llm/loop) and calls these
// activities: StartAgent once (the task in words, the tools, the agent's
// chaos armed), ModelTurn for each model turn (on any worker: the provider
// is built in that process, its key read from that process's environment),
// AgentToolCall for each tool call (on the scenario's own worker, through
// its chaos), FinishAgent once (the report becomes the action's claim and
// the action is recorded). ModelTurn and AgentToolCall write ahead
// (AgentSteps): a retried activity answers the recorded result, so a
// worker that stops in the middle never makes a turn billed twice or a
// tool call made twice. The agent itself (agent.Spec: provider, model,
// bounds, via path) is sandbox/agent's.

// AgentSteps is the write-ahead record of model turns and tool calls
// (*benchstore.Store).
type AgentSteps interface {
	BeginAgentStep(ctx context.Context, runID, scenarioID, kind string, index int, requestHash []byte) (json.RawMessage, bool, error)
	CompleteAgentStep(ctx context.Context, runID, scenarioID, kind string, index int, result json.RawMessage) (json.RawMessage, error)
}

// llmState is a live scenario's model-driven agent.
type llmState struct {
	spec  agent.Spec
	start AgentStart
	// trajectory is the finished conversation's, once FinishAgent ran.
	trajectory *llm.Trajectory
	// via is the run's via path (nil: direct; via_run.go).
	via *viaState
}

// StartAgentInput starts a scenario's model-driven agent.
type StartAgentInput struct {
	StepInput
	Agent agent.Spec
}

// AgentStart is what the conversation starts from.
type AgentStart struct {
	System string
	Task   string
	Tools  []llm.Tool
	// RequestedAt is the action's requested_at.
	RequestedAt time.Time
}

// StartAgent runs the scenario's prior tasks (if RunPrior did not), fixes
// the action's requested_at, writes the task in words (for a fake
// provider, with the plan the fake model follows: the scripted agent's
// calls, read from the enterprise as it stands before the agent's chaos,
// the injected instructions a follower obeys, the temperament of the
// scenario's profile) and arms the agent's chaos. Calling it again returns
// the same start.
func (a *Activities) StartAgent(ctx context.Context, in StartAgentInput) (AgentStart, error) {
	l, err := a.get(in.TenantID)
	if err != nil {
		return AgentStart{}, err
	}
	spec, err := in.Agent.Normalize()
	if err != nil {
		return AgentStart{}, invalidInput(err.Error(), nil)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.llm != nil {
		return l.llm.start, nil
	}
	if l.agentDone || l.closed {
		return AgentStart{}, invalidInput("the scenario's agent already ran or the scenario is closed", nil)
	}
	if err := l.runPrior(ctx); err != nil {
		return AgentStart{}, err
	}
	e := l.Env.Enterprise
	start := AgentStart{System: agent.ModelSystem, Tools: agent.ModelTools(), RequestedAt: agent.StartTime(e.Clock())}
	var plan *agent.ModelPlan
	if spec.Fake() {
		p, err := buildPlan(ctx, l)
		if err != nil {
			return AgentStart{}, fmt.Errorf("plan for the fake model: %w", err)
		}
		plan = &p
	}
	start.Task = agent.ModelTask(l.Scenario.Task, plan)
	var via *viaState
	if spec.Via != "" {
		if via, err = a.startVia(ctx, l, spec.Via); err != nil {
			return AgentStart{}, err
		}
	}
	if err := l.armAgentChaos(ctx); err != nil {
		via.close()
		return AgentStart{}, err
	}
	l.llm = &llmState{spec: spec, start: start, via: via}
	return start, nil
}

// ModelTurnInput is one model turn of a scenario.
type ModelTurnInput struct {
	RunID      string
	ScenarioID string
	// Index counts the scenario's turns from 0.
	Index    int
	Provider string
	Model    string
	Request  llm.Request
}

// ModelTurn makes one model turn with this process's provider. Its row in
// AgentSteps is written first; a retry of a turn whose answer is recorded
// returns that answer without asking the provider again. Provider errors
// are application errors Temporal retries or not by their kind
// (llmtemporal).
func (a *Activities) ModelTurn(ctx context.Context, in ModelTurnInput) (llm.Response, error) {
	if a.Models == nil || a.AgentSteps == nil {
		return llm.Response{}, invalidInput("this worker runs no model-driven agents", nil)
	}
	p, err := a.Models.Provider(in.Provider, in.Model)
	if err != nil {
		return llm.Response{}, llmtemporal.ApplicationError(err)
	}
	hash, err := requestHash(in.Provider, in.Model, in.Request)
	if err != nil {
		return llm.Response{}, invalidInput(err.Error(), nil)
	}
	return writeAhead(ctx, a, in.RunID, in.ScenarioID, "turn", in.Index, hash, func(started bool) (llm.Response, error) {
		if started {
			// An earlier attempt asked and recorded no answer: it failed (a
			// retryable provider error) or its worker stopped mid-request.
			a.logger().Info("model turn asked again", "scenario", in.ScenarioID, "turn", in.Index)
		}
		return llmtemporal.Turn(ctx, p, in.Request)
	})
}

// ToolCallInput is one tool call of a scenario's model-driven agent.
type ToolCallInput struct {
	StepInput
	// Index counts the scenario's tool calls from 0.
	Index int
	Call  llm.ToolCall
}

// AgentToolCall makes one tool call over HTTP through the scenario's agent
// chaos and answers it as the model will see it. Its row in AgentSteps is
// written first; a retry returns the recorded attempt, and a retry of a
// call whose worker stopped before recording it is answered "outcome
// unknown" (a timeout, as the agent would have seen it) instead of making
// the call again. The attempt's number is left to the conversation.
func (a *Activities) AgentToolCall(ctx context.Context, in ToolCallInput) (llm.Attempt, error) {
	if a.AgentSteps == nil {
		return llm.Attempt{}, invalidInput("this worker runs no model-driven agents", nil)
	}
	l, err := a.get(in.TenantID)
	if err != nil {
		return llm.Attempt{}, err
	}
	hash, err := requestHash(in.Call.Name, in.Call.ID, in.Call.Args)
	if err != nil {
		return llm.Attempt{}, invalidInput(err.Error(), nil)
	}
	conn := l.viaConn()
	return writeAhead(ctx, a, in.RunID, in.ScenarioID, "call", in.Index, hash, func(started bool) (llm.Attempt, error) {
		var at llm.Attempt
		args, key, aerr := agent.ModelArgs(in.Call.Args)
		switch {
		case started:
			at = llm.Attempt{Tool: in.Call.Name, Args: args,
				Error: "timeout: no answer (the call's outcome is unknown; it may or may not have happened)"}
		case conn != nil:
			// Through CommitLayer's MCP gateway to the tool server.
			at = conn.call(ctx, in.Call.Name, in.Call.Args)
		case aerr != nil:
			at = agent.Attempt(llm.Attempt{Tool: in.Call.Name}, fmt.Errorf("call tool %q: %w", in.Call.Name, aerr))
		default:
			c := agent.Client{BaseURL: l.Env.Enterprise.URL(), HTTP: &http.Client{Transport: l.AgentChaos, Timeout: clientTimeout}}
			call, err := c.Do(ctx, in.Call.Name, args, key)
			if err != nil {
				call = llm.Attempt{Tool: in.Call.Name, Args: args}
			}
			at = agent.Attempt(call, err)
		}
		at.Attempt = 0
		return at, nil
	})
}

// writeAhead runs one step of a model-driven agent (kind "turn" or "call")
// at most once: its row in AgentSteps is written before act runs and act's
// answer after. A retry answers the recorded result without acting; act
// learns whether an earlier attempt began and recorded nothing. Of two
// attempts racing, the first answer recorded is the answer. AfterStep runs
// after an answer this attempt recorded.
func writeAhead[T any](ctx context.Context, a *Activities, runID, scenarioID, kind string, index int, hash []byte,
	act func(started bool) (T, error)) (T, error) {
	var out T
	name := fmt.Sprintf("agent %s %d", kind, index)
	recorded, started, err := a.AgentSteps.BeginAgentStep(ctx, runID, scenarioID, kind, index, hash)
	if err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	acted := recorded == nil
	if acted {
		res, err := act(started)
		if err != nil {
			return out, err
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return out, fmt.Errorf("%s: encode the answer: %w", name, err)
		}
		if recorded, err = a.AgentSteps.CompleteAgentStep(ctx, runID, scenarioID, kind, index, raw); err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := json.Unmarshal(recorded, &out); err != nil {
		return out, fmt.Errorf("%s: decode the recorded answer: %w", name, err)
	}
	if acted && a.AfterStep != nil {
		if err := a.AfterStep(ctx, kind, index); err != nil {
			var zero T
			return zero, err
		}
	}
	return out, nil
}

// requestHash is the SHA-256 of the parts' JSON.
func requestHash(parts ...any) ([]byte, error) {
	h := sha256.New()
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("hash request: %w", err)
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return h.Sum(nil), nil
}

// FinishAgentInput ends a scenario's model-driven agent.
type FinishAgentInput struct {
	StepInput
	Trajectory llm.Trajectory
}

// FinishAgent turns the conversation's report into the action's claim (a
// conversation that ended without one, an agent error, claims failure with
// the error) and records the action through the API path.
func (a *Activities) FinishAgent(ctx context.Context, in FinishAgentInput) (AgentResult, error) {
	l, err := a.get(in.TenantID)
	if err != nil {
		return AgentResult{}, err
	}
	l.mu.Lock()
	if l.llm == nil {
		l.mu.Unlock()
		return AgentResult{}, invalidInput("the model-driven agent was never started", nil)
	}
	if !l.agentDone {
		tr := in.Trajectory
		claim := commitlayer.Claim{Status: tr.Report.Status, Message: tr.Report.Message}
		if claim.Status == "" {
			claim = commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "agent error: " + tr.Error}
		}
		// The action's trace is the conversation's calls and report, not
		// its turns (the row keeps those).
		at := llm.Trajectory{Instruction: tr.Instruction, Calls: tr.Calls,
			Report: llm.Report{Status: claim.Status, Message: claim.Message}}
		act, err := agent.NewAction(l.Scenario.Task, l.llm.start.RequestedAt, claim, at)
		if err != nil {
			l.mu.Unlock()
			return AgentResult{}, invalidInput(err.Error(), nil)
		}
		l.Env.Result = agent.Result{Action: act, Trajectory: at}
		l.llm.trajectory = &tr
		l.agentDone = true
	}
	res := l.Env.Result
	via := l.llm.via
	l.mu.Unlock()
	if via != nil {
		// The gateway or the trace ingest records; the harness does not.
		out, err := a.finishVia(ctx, in, l, res)
		if err == nil && activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Info("model-driven agent finished", "scenario", in.ScenarioID, "via", via.mode,
				"claim", res.Action.Claim.Status, "calls", len(res.Trajectory.Calls), "task_action", out.Recorded.Action.ID,
				"other_actions", len(out.Also))
		}
		return out, err
	}
	rec, err := a.record(ctx, in.StepInput, res.Action, "main")
	if err != nil {
		return AgentResult{}, err
	}
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Info("model-driven agent finished", "scenario", in.ScenarioID, "claim", res.Action.Claim.Status,
			"calls", len(res.Trajectory.Calls))
	}
	return AgentResult{Recorded: rec, Claim: res.Action.Claim.Status, Calls: len(res.Trajectory.Calls)}, nil
}

// llmRow puts a model-driven agent's trajectory (with its turns), rule
// judge and tokens on its row.
func llmRow(l *live, row *matrix.Row) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.llm == nil || l.llm.trajectory == nil {
		return
	}
	tr := *l.llm.trajectory
	row.Trajectory = &tr
	row.Judges = []matrix.JudgeVerdict{ruleJudge(tr)}
	model := tr.Model
	if model == "" {
		model = l.llm.spec.Model
	}
	cost := llm.CostOf(model, tr.Usage)
	row.LLM = &matrix.RowLLM{Provider: l.llm.spec.Provider, Model: model, Turns: len(tr.Turns),
		InputTokens: tr.Usage.InputTokens, OutputTokens: tr.Usage.OutputTokens,
		CostNanoUSD: cost.NanoUSD, CostKnown: cost.Known, AgentError: tr.Error}
}
