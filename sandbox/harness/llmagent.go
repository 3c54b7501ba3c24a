package harness

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/llm/llmtemporal"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
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
// tool call made twice.

// AgentLLM is the agent kind of a run with a model-driven agent ("" is the
// scripted agent).
const AgentLLM = "llm"

// Provider names of a model-driven run: the three real providers, and a
// fake of each (llm/fake, in this process, driven by the sandbox's plan)
// through the same SDK adapter.
const (
	FakePrefix    = "fake-"
	FakeAnthropic = FakePrefix + llm.Anthropic
	FakeOpenAI    = FakePrefix + llm.OpenAI
	FakeGoogle    = FakePrefix + llm.Google
)

// AgentProviders lists the provider names a model-driven run accepts.
var AgentProviders = []string{llm.Anthropic, llm.OpenAI, llm.Google, FakeAnthropic, FakeOpenAI, FakeGoogle}

// FakeProviders are the three fakes, one per SDK adapter.
var FakeProviders = []string{FakeAnthropic, FakeOpenAI, FakeGoogle}

// Bounds of a model-driven scenario when the run names none.
const (
	DefaultMaxTurns  = 20
	DefaultMaxTokens = 1024
)

// AgentSpec is a run's model-driven agent: names and bounds only, never a
// key (each worker reads its provider's key from its own environment).
type AgentSpec struct {
	Kind     string `json:"kind"` // AgentLLM
	Provider string `json:"provider"`
	// Model is the model every turn asks for ("" is the provider's
	// default, llm.DefaultModels; "fake-<provider>" for a fake).
	Model string `json:"model,omitempty"`
	// MaxTurns bounds each scenario's model turns; MaxTokens each turn's
	// output.
	MaxTurns  int `json:"max_turns,omitempty"`
	MaxTokens int `json:"max_tokens,omitempty"`
	// TokenBudget bounds the run's tokens (input plus output; 0: none).
	// Once spent, no scenario starts and a running one stops at its next
	// turn; the scenarios not started are listed as not run.
	TokenBudget int64 `json:"token_budget,omitempty"`
}

// Normalize checks the spec and fills in its defaults.
func (s AgentSpec) Normalize() (AgentSpec, error) {
	if s.Kind == "" {
		s.Kind = AgentLLM
	}
	if s.Kind != AgentLLM {
		return s, &commitlayer.FieldError{Field: "agent", Reason: fmt.Sprintf("%q is not an agent; use %q (or leave it out for the scripted agent)", s.Kind, AgentLLM)}
	}
	if !slices.Contains(AgentProviders, s.Provider) {
		return s, &commitlayer.FieldError{Field: "provider", Reason: fmt.Sprintf("%q is not a provider; use one of %s", s.Provider, strings.Join(AgentProviders, ", "))}
	}
	switch {
	case s.MaxTurns < 0 || s.MaxTurns > 100:
		return s, &commitlayer.FieldError{Field: "max_turns", Reason: "must be between 0 (the default) and 100"}
	case s.MaxTokens < 0 || s.MaxTokens > 32000:
		return s, &commitlayer.FieldError{Field: "max_tokens", Reason: "must be between 0 (the default) and 32000"}
	case s.TokenBudget < 0:
		return s, &commitlayer.FieldError{Field: "token_budget", Reason: "must not be negative"}
	}
	if s.MaxTurns == 0 {
		s.MaxTurns = DefaultMaxTurns
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = DefaultMaxTokens
	}
	if s.Model == "" {
		if wire, ok := strings.CutPrefix(s.Provider, FakePrefix); ok {
			s.Model = "fake-" + wire
		} else {
			s.Model = llm.DefaultModels[s.Provider]
		}
	}
	return s, nil
}

// Fake reports whether the spec's provider is a fake.
func (s AgentSpec) Fake() bool { return strings.HasPrefix(s.Provider, FakePrefix) }

// SkipForModel says why a scenario does not apply to a model-driven agent:
// it scripts one specific agent behaviour (making no call, acting on
// another record, sending other values than the task's) that a model
// decides for itself. "" means it applies.
func SkipForModel(sc Scenario) string {
	p := sc.Profile
	switch {
	case p.NoCalls:
		return "scripts an agent that makes no call and reports success"
	case p.WrongSubject != "":
		return "scripts an agent that acts on another record (" + p.WrongSubject + ") than it reports"
	case len(p.OverrideParams) > 0:
		keys := make([]string, 0, len(p.OverrideParams))
		for k := range p.OverrideParams {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return "scripts an agent that sends other values than the task's (" + strings.Join(keys, ", ") + ")"
	}
	return ""
}

// Skipped is a scenario a model-driven run leaves out, and why.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// SplitForModel splits scenarios into those a model-driven agent runs and
// those it skips.
func SplitForModel(scenarios []Scenario) (run []Scenario, skipped []Skipped) {
	for _, sc := range scenarios {
		if r := SkipForModel(sc); r != "" {
			skipped = append(skipped, Skipped{ID: sc.ID, Reason: r})
			continue
		}
		run = append(run, sc)
	}
	return run, skipped
}

// AgentSteps is the write-ahead record of model turns and tool calls
// (*postgres.DB).
type AgentSteps interface {
	BeginAgentStep(ctx context.Context, runID, scenarioID, kind string, index int, requestHash []byte) (json.RawMessage, bool, error)
	CompleteAgentStep(ctx context.Context, runID, scenarioID, kind string, index int, result json.RawMessage) (json.RawMessage, error)
}

// Models builds this process's model providers by name, once each: a real
// one with its key from this process's environment (llm.FromEnv), a fake
// one as an in-process fake server of that provider's wire, driven by the
// sandbox's plan policy (agent.ModelPolicy).
type Models struct {
	mu        sync.Mutex
	providers map[string]llm.Provider
	fakes     map[string]*fake.Server
}

// Provider returns the named provider asking for model.
func (m *Models) Provider(name, model string) (llm.Provider, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := name + "\n" + model
	if p, ok := m.providers[key]; ok {
		return p, nil
	}
	if m.providers == nil {
		m.providers = map[string]llm.Provider{}
		m.fakes = map[string]*fake.Server{}
	}
	var (
		p   llm.Provider
		err error
	)
	if wire, ok := strings.CutPrefix(name, FakePrefix); ok {
		var s *fake.Server
		s, p, err = fake.New(wire, agent.ModelPolicy(), fake.WithModel(model))
		if err == nil {
			m.fakes[key] = s
		}
	} else {
		p, err = llm.FromEnv(name, model)
	}
	if err != nil {
		return nil, err
	}
	m.providers[key] = p
	return p, nil
}

// Fake returns this process's fake server of the named fake provider for
// model, starting it if needed (tests inject faults into it).
func (m *Models) Fake(name, model string) (*fake.Server, error) {
	if !strings.HasPrefix(name, FakePrefix) {
		return nil, fmt.Errorf("%q is not a fake provider", name)
	}
	if _, err := m.Provider(name, model); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fakes[name+"\n"+model], nil
}

// FakeRequests returns what this process's fake servers of the named fake
// provider have served (for tests: a turn billed twice would show twice).
func (m *Models) FakeRequests(name string) []fake.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fake.Request
	for key, s := range m.fakes {
		if strings.HasPrefix(key, name+"\n") {
			out = append(out, s.Requests()...)
		}
	}
	return out
}

// Close stops the fake servers.
func (m *Models) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.fakes {
		s.Close()
		delete(m.fakes, k)
		delete(m.providers, k)
	}
}

// llmState is a live scenario's model-driven agent.
type llmState struct {
	spec  AgentSpec
	start AgentStart
	// trajectory is the finished conversation's, once FinishAgent ran.
	trajectory *llm.Trajectory
}

// StartAgentInput starts a scenario's model-driven agent.
type StartAgentInput struct {
	StepInput
	Agent AgentSpec
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
		return AgentStart{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", nil)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.llm != nil {
		return l.llm.start, nil
	}
	if l.agentDone || l.closed {
		return AgentStart{}, temporal.NewNonRetryableApplicationError("the scenario's agent already ran or the scenario is closed", "InvalidInput", nil)
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
	if err := l.armAgentChaos(ctx); err != nil {
		return AgentStart{}, err
	}
	l.llm = &llmState{spec: spec, start: start}
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
		return llm.Response{}, temporal.NewNonRetryableApplicationError("this worker runs no model-driven agents", "InvalidInput", nil)
	}
	p, err := a.Models.Provider(in.Provider, in.Model)
	if err != nil {
		return llm.Response{}, llmtemporal.ApplicationError(err)
	}
	hash, err := requestHash(in.Provider, in.Model, in.Request)
	if err != nil {
		return llm.Response{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", nil)
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
		return llm.Attempt{}, temporal.NewNonRetryableApplicationError("this worker runs no model-driven agents", "InvalidInput", nil)
	}
	l, err := a.get(in.TenantID)
	if err != nil {
		return llm.Attempt{}, err
	}
	hash, err := requestHash(in.Call.Name, in.Call.ID, in.Call.Args)
	if err != nil {
		return llm.Attempt{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", nil)
	}
	return writeAhead(ctx, a, in.RunID, in.ScenarioID, "call", in.Index, hash, func(started bool) (llm.Attempt, error) {
		var at llm.Attempt
		args, key, aerr := agent.ModelArgs(in.Call.Args)
		switch {
		case started:
			at = llm.Attempt{Tool: in.Call.Name, Args: args,
				Error: "timeout: no answer (the call's outcome is unknown; it may or may not have happened)"}
		case aerr != nil:
			at = agent.Attempt(agent.Call{Tool: in.Call.Name}, fmt.Errorf("call tool %q: %w", in.Call.Name, aerr))
		default:
			c := agent.Client{BaseURL: l.Env.Enterprise.URL(), HTTP: &http.Client{Transport: l.AgentChaos, Timeout: clientTimeout}}
			call, err := c.Do(ctx, in.Call.Name, args, key)
			if err != nil {
				call = agent.Call{Tool: in.Call.Name, Args: args}
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
		return AgentResult{}, temporal.NewNonRetryableApplicationError("the model-driven agent was never started", "InvalidInput", nil)
	}
	if !l.agentDone {
		tr := in.Trajectory
		claim := commitlayer.Claim{Status: tr.Report.Status, Message: tr.Report.Message}
		if claim.Status == "" {
			claim = commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "agent error: " + tr.Error}
		}
		calls := make([]agent.Call, 0, len(tr.Calls))
		for _, c := range tr.Calls {
			calls = append(calls, agent.CallFromAttempt(c))
		}
		at := agent.Trajectory{Instruction: tr.Instruction, Calls: calls, Report: claim}
		act, err := agent.NewAction(l.Scenario.Task, l.llm.start.RequestedAt, claim, at)
		if err != nil {
			l.mu.Unlock()
			return AgentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", nil)
		}
		l.Env.Result = agent.Result{Action: act, Trajectory: at}
		l.llm.trajectory = &tr
		l.agentDone = true
	}
	res := l.Env.Result
	l.mu.Unlock()
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

// RowLLM is a model-driven row's provider, tokens and estimated cost.
type RowLLM struct {
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Turns        int    `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	// CostNanoUSD is the estimate at list price (10⁻⁹ USD); CostKnown is
	// false for a model with no price (a fake).
	CostNanoUSD int64 `json:"cost_nano_usd"`
	CostKnown   bool  `json:"cost_known"`
	// AgentError is why the agent stopped without a report (malformed
	// output, a refused turn, the turn limit, the budget).
	AgentError string `json:"agent_error,omitempty"`
}

// Tokens is input plus output.
func (r RowLLM) Tokens() int64 { return r.InputTokens + r.OutputTokens }

// llmRow puts a model-driven agent's trajectory (with its turns), rule
// judge and tokens on its row.
func llmRow(l *live, row *Row) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.llm == nil || l.llm.trajectory == nil {
		return
	}
	tr := *l.llm.trajectory
	row.Trajectory = &tr
	row.Judges = []JudgeVerdict{ruleJudge(tr)}
	model := tr.Model
	if model == "" {
		model = l.llm.spec.Model
	}
	cost := llm.CostOf(model, tr.Usage)
	row.LLM = &RowLLM{Provider: l.llm.spec.Provider, Model: model, Turns: len(tr.Turns),
		InputTokens: tr.Usage.InputTokens, OutputTokens: tr.Usage.OutputTokens,
		CostNanoUSD: cost.NanoUSD, CostKnown: cost.Known, AgentError: tr.Error}
}

// planner runs a business process's script without acting: reads go to
// the enterprise (without chaos; reads change nothing), writes are only
// written down. The steps are the plan the fake model follows.
type planner struct {
	client agent.Client
	task   agent.Task
	steps  []fake.Step
}

var _ business.Steps = (*planner)(nil)

func (p *planner) ID() string { return p.task.Subject.ID() }

func (p *planner) Ticket() string {
	if p.task.TicketID != "" {
		return p.task.TicketID
	}
	s, _ := p.task.Params["ticket_id"].(string)
	return s
}

func (p *planner) Read(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	p.steps = append(p.steps, fake.Step{Tool: tool, Args: args})
	c, err := p.client.Do(ctx, tool, args, "")
	if err != nil {
		return nil, err
	}
	if !c.OK() {
		return nil, errPlanStops
	}
	obj, err := c.Object()
	if err != nil {
		return nil, errPlanStops
	}
	return obj, nil
}

func (p *planner) Call(_ context.Context, tool string, args map[string]any) error {
	p.steps = append(p.steps, fake.Step{Tool: tool, Args: args})
	return nil
}

func (p *planner) ReadTicket(ctx context.Context, id string) error {
	_, err := p.Read(ctx, "get_ticket", map[string]any{"ticket_id": id})
	return err
}

func (p *planner) Note(ctx context.Context, body string) error {
	if t := p.Ticket(); t != "" {
		return p.Call(ctx, "add_note", map[string]any{"ticket_id": t, "body": body})
	}
	return nil
}

func (p *planner) Param(name string) any { return p.task.Params[name] }

func (p *planner) Fail(string, string) error { return errPlanStops }

// errPlanStops ends a plan where the script would stop before acting: the
// fake model then does what the steps so far lead to.
var errPlanStops = errors.New("the script stops here")

// buildPlan is the fake model's plan for l's task.
func buildPlan(ctx context.Context, l *live) (agent.ModelPlan, error) {
	task := l.Scenario.Task
	pl := &planner{client: agent.Client{BaseURL: l.Env.Enterprise.URL(), HTTP: &http.Client{Timeout: clientTimeout}}, task: task}
	proc, ok := business.Lookup(task.Workflow)
	if !ok {
		return agent.ModelPlan{}, fmt.Errorf("unknown process %q", task.Workflow)
	}
	if err := proc.Script(ctx, pl); err != nil && !errors.Is(err, errPlanStops) {
		return agent.ModelPlan{}, err
	}
	plan := agent.ModelPlan{Plan: fake.Plan{Steps: pl.steps, Report: proc.Report(task.Subject.ID(), task.Params)},
		Temperament: agent.Temperament(l.Scenario.Profile)}
	if plan.Temperament.FollowInjected {
		rules, err := followRules(ctx, pl.client, task)
		if err != nil {
			return agent.ModelPlan{}, err
		}
		plan.Follow = rules
	}
	return plan, nil
}

// followRules turn the instructions agent.ParseInstructions finds into
// the scripted follower's calls. "Refund … in full" of the refund task's
// own order is the task itself, as the scripted follower reads it, and has
// no rule. "Refund … in full" needs what is left on the order's charge: the rules
// name every seeded order with a charge, with the amount read now.
func followRules(ctx context.Context, c agent.Client, task agent.Task) ([]fake.FollowRule, error) {
	var rules []fake.FollowRule
	for _, o := range sandbox.DefaultSeed().Orders {
		if task.Workflow == business.Refund && o.ID == task.Subject.ID() {
			continue
		}
		ch, err := c.Do(ctx, "get_charge", map[string]any{"order_id": o.ID}, "")
		if err != nil {
			return nil, err
		}
		if !ch.OK() {
			continue // no charge: nothing to refund
		}
		obj, err := ch.Object()
		if err != nil {
			continue
		}
		amount, ok1 := business.Int(obj["amount"])
		refunded, _ := business.Int(obj["refunded"])
		currency, _ := obj["currency"].(string)
		if !ok1 || amount-refunded <= 0 || currency == "" {
			continue
		}
		rules = append(rules, fake.FollowRule{
			Pattern: `(?i)\brefund\s+(?:order\s+)?` + regexp.QuoteMeta(o.ID) + `\s+in\s+full`,
			Steps: []fake.Step{
				{Tool: "get_charge", Args: map[string]any{"order_id": o.ID}},
				{Tool: "refund", Args: map[string]any{"order_id": o.ID, "amount": amount - refunded, "currency": currency,
					"reason": "requested_by_customer"}},
			}})
	}
	rules = append(rules,
		fake.FollowRule{Pattern: `(?i)\brefund\s+(?:order\s+)?(o_[A-Za-z0-9_-]+)\s+(?:by|for|of)\s+(\d+)`,
			Steps: []fake.Step{{Tool: "refund", Args: map[string]any{"order_id": "$1", "amount": "$2", "currency": "USD", "reason": "requested_by_customer"}}}},
		fake.FollowRule{Pattern: `(?i)\bcancel\s+(?:subscription\s+)?(sub_[A-Za-z0-9_-]+)`,
			Steps: []fake.Step{{Tool: "cancel_subscription", Args: map[string]any{"subscription_id": "$1"}},
				{Tool: "stop_billing", Args: map[string]any{"subscription_id": "$1"}}}},
		fake.FollowRule{Pattern: `(?i)\bclose\s+(?:ticket\s+|case\s+)?(t_[A-Za-z0-9_-]+)`,
			Steps: []fake.Step{{Tool: "close_ticket", Args: map[string]any{"ticket_id": "$1", "resolution": "Resolved."}}}},
		fake.FollowRule{Pattern: `(?i)\b(?:send|pay)\s+(?:a\s+)?payout\s+of\s+(\d+)\s+to\s+(?:account\s+)?(acc_[A-Za-z0-9_-]+)`,
			Steps: []fake.Step{{Tool: "send_payout", Args: map[string]any{"account_id": "$2", "amount": "$1", "currency": "USD"}}}},
	)
	return rules, nil
}
