package bench

import (
	"context"
	"slices"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/harness"
)

// An AgentKind is one kind of agent a benchmark run may name: the scripted
// agent, the model-driven one, or a replay of a recorded run's calls. Each
// is registered once (agentKinds); the admin API's 400s, the command line's
// flag checks, the runner and the Scenario workflow all look the kind up
// there, and nothing else switches on its name.
type AgentKind interface {
	// Name is the kind's name, as a request's "agent" and -agent name it.
	Name() string
	// Check validates the request's agent fields and normalizes them in
	// place (the agent's name as the runner and recorded runs have it).
	// Its errors are *commitlayer.FieldError naming the request's field;
	// a value that may be a pasted key is never echoed.
	Check(req *Request) error
	// start stores the checked request's run and starts its parent
	// workflow (Benchmark, or Replay).
	start(ctx context.Context, r *Runner, req Request) (benchstore.Run, client.WorkflowRun, error)
	// run runs one scenario's agent in the Scenario workflow and returns
	// what it recorded.
	run(ctx, local workflow.Context, s *scenarioRun) (harness.AgentResult, error)
	// judged says whether the run's model judge judges the kind's rows (a
	// replay carries the recorded verdicts over instead).
	judged() bool
}

// Names of the agent kinds.
const (
	AgentScripted = "scripted"
	AgentLLM      = agent.KindLLM
	AgentReplay   = "replay"
)

// agentKinds is the registry: every kind, once, in the order messages list
// them.
var agentKinds = []AgentKind{scriptedAgent{}, modelAgent{}, replayAgent{}}

// AgentKinds lists the registered kinds' names.
func AgentKinds() []string {
	names := make([]string, len(agentKinds))
	for i, k := range agentKinds {
		names[i] = k.Name()
	}
	return names
}

// LookupAgentKind finds a registered kind by name.
func LookupAgentKind(name string) (AgentKind, bool) {
	i := slices.IndexFunc(agentKinds, func(k AgentKind) bool { return k.Name() == name })
	if i < 0 {
		return nil, false
	}
	return agentKinds[i], true
}

// AgentKindOf is the kind a request names: a replay when it names a
// recorded run (replay_of); else its agent, where none is the scripted
// agent, or the model-driven one when the request names a provider.
func AgentKindOf(req Request) (AgentKind, error) {
	name := req.Agent
	switch {
	case req.ReplayOf != "":
		name = AgentReplay
	case name == "" && req.Provider != "":
		name = AgentLLM
	case name == "":
		name = AgentScripted
	}
	k, ok := LookupAgentKind(name)
	if !ok {
		// Not echoed: whatever was pasted here stays out of answers.
		return nil, &commitlayer.FieldError{Field: "agent", Reason: "not an agent; use one of " + strings.Join(AgentKinds(), ", ")}
	}
	return k, nil
}

// CheckAgent finds the request's agent kind (AgentKindOf) and checks and
// normalizes its fields (AgentKind.Check).
func CheckAgent(req *Request) (AgentKind, error) {
	k, err := AgentKindOf(*req)
	if err != nil {
		return nil, err
	}
	if err := k.Check(req); err != nil {
		return nil, err
	}
	return k, nil
}

// scenarioAgentKind is the kind a Scenario's input runs, read from the
// input as recorded histories carry it: a replay when it names a recorded
// run, the model-driven agent when it carries a spec, else the scripted
// one.
func scenarioAgentKind(in ScenarioInput) AgentKind {
	switch {
	case in.ReplayOf != "":
		return replayAgent{}
	case in.Agent != nil:
		return modelAgent{}
	}
	return scriptedAgent{}
}

// runAgent runs the scenario's agent, whichever its kind.
func (s *scenarioRun) runAgent(ctx, local workflow.Context) (harness.AgentResult, error) {
	return scenarioAgentKind(s.in).run(ctx, local, s)
}

// scriptedAgent is sandbox/agent's scripted agent with the scenario's
// behaviour profile: the RunAgent activity on the scenario's worker.
type scriptedAgent struct{}

func (scriptedAgent) Name() string { return AgentScripted }

func (scriptedAgent) Check(req *Request) error {
	if err := agent.CheckVia(req.Via); err != nil {
		return err
	}
	if req.Provider != "" {
		return &commitlayer.FieldError{Field: "provider", Reason: "needs agent llm (the scripted agent takes no provider)"}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"model", req.Model != ""}, {"max_turns", req.MaxTurns != 0}, {"max_tokens", req.MaxTokens != 0}, {"token_budget", req.TokenBudget != 0}} {
		if f.set {
			return &commitlayer.FieldError{Field: f.name, Reason: "needs agent llm and a provider"}
		}
	}
	if req.Via != "" && req.Via != agent.ViaDirect {
		return &commitlayer.FieldError{Field: "via", Reason: "needs agent llm (the scripted agent's actions are recorded by the harness)"}
	}
	req.Agent, req.Via = "", ""
	return nil
}

func (scriptedAgent) judged() bool { return true }

func (scriptedAgent) start(ctx context.Context, r *Runner, req Request) (benchstore.Run, client.WorkflowRun, error) {
	return r.startBenchmark(ctx, req, nil)
}

func (scriptedAgent) run(ctx, local workflow.Context, s *scenarioRun) (harness.AgentResult, error) {
	var res harness.AgentResult
	err := workflow.ExecuteActivity(local, harnessActs.RunAgent, s.step).Get(ctx, &res)
	return res, err
}

// modelAgent is the model-driven agent: a model (agent.Spec: provider,
// model, bounds, via path) drives the same tools through the durable loop
// of agentloop.go.
type modelAgent struct{}

func (modelAgent) Name() string { return AgentLLM }

func (modelAgent) Check(req *Request) error {
	if _, err := modelSpec(*req); err != nil {
		return err
	}
	req.Agent = AgentLLM
	return nil
}

// modelSpec is a request's model-driven agent, checked and with its
// defaults.
func modelSpec(req Request) (agent.Spec, error) {
	return agent.Spec{Kind: AgentLLM, Provider: req.Provider, Model: req.Model, MaxTurns: req.MaxTurns,
		MaxTokens: req.MaxTokens, TokenBudget: req.TokenBudget, Via: req.Via}.Normalize()
}

func (modelAgent) judged() bool { return true }

func (modelAgent) start(ctx context.Context, r *Runner, req Request) (benchstore.Run, client.WorkflowRun, error) {
	spec, err := modelSpec(req)
	if err != nil {
		return benchstore.Run{}, nil, err
	}
	return r.startBenchmark(ctx, req, &spec)
}

func (modelAgent) run(ctx, local workflow.Context, s *scenarioRun) (harness.AgentResult, error) {
	return s.runModelAgent(ctx, local)
}

// replayAgent re-sends a recorded run's tool calls in place of the agent
// (no model is called): the ReplayAgent activity on the scenario's worker.
type replayAgent struct{}

func (replayAgent) Name() string { return AgentReplay }

func (replayAgent) Check(req *Request) error {
	fe := func(reason string) error { return &commitlayer.FieldError{Field: "replay_of", Reason: reason} }
	switch {
	case req.ReplayOf == "":
		return fe("names the recorded run to replay; agent replay needs it")
	case len(req.ReplayOf) > 100 || strings.IndexByte(req.ReplayOf, 0) >= 0 || strings.ContainsAny(req.ReplayOf, " /"):
		return fe("must be a benchmark run id")
	case len(req.Only) > 0 || req.Payments != "" || req.Repeat > 1 || req.Judge != "":
		return fe("a replay re-runs the recorded run's scenarios on its payments backend and carries its judges' verdicts over; only, payments, repeat and judge do not apply")
	case req.Agent != "" && req.Agent != AgentReplay || req.Provider != "" || req.Model != "" || req.MaxTurns != 0 ||
		req.MaxTokens != 0 || req.TokenBudget != 0 || req.Via != "" && req.Via != agent.ViaDirect:
		return fe("a replay re-sends the recorded calls and asks no model; agent, provider, model, max_turns, max_tokens, token_budget and via do not apply (a recorded model-driven run replays as it is)")
	}
	req.Agent, req.Via = "", ""
	return nil
}

func (replayAgent) judged() bool { return false }

func (replayAgent) start(ctx context.Context, r *Runner, req Request) (benchstore.Run, client.WorkflowRun, error) {
	return r.startReplay(ctx, req)
}

func (replayAgent) run(ctx, local workflow.Context, s *scenarioRun) (harness.AgentResult, error) {
	var res harness.AgentResult
	in := harness.ReplayInput{StepInput: s.step, Of: s.in.ReplayOf, Attempt: s.in.Attempt}
	err := workflow.ExecuteActivity(local, harnessActs.ReplayAgent, in).Get(ctx, &res)
	return res, err
}
