package catalogue

import (
	"context"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

// Scenario is one row of the failure matrix. It never states the expected
// verdict: the oracle reads the systems' files and says what the truth was.
type Scenario struct {
	// ID is "process/injection", e.g. "refund/lost_response_retry_no_key".
	ID string
	// Process names the business process, one of the eight of
	// sandbox/business (rows keep the JSON name "workflow").
	Process string
	// Injection names what goes wrong (the part of ID after the slash).
	Injection string
	// Family groups injections for the summary and the regression subset
	// (see Families).
	Family string
	// Summary says in words what happens.
	Summary string

	// Task is what the agent is asked; AgentID defaults to DefaultAgent.
	Task agent.Task
	// Profile is how the scripted agent behaves.
	Profile agent.Profile
	// Seed adjusts the enterprise's default seed before it is built.
	Seed func(*sandbox.Seed)
	// AgentChaos is armed on the agent's transport before it acts.
	AgentChaos func(*Env) []chaos.Rule
	// ExtractChaos is armed on the connectors' transport before the agent
	// acts (so a stale read's snapshot predates the action).
	ExtractChaos func(*Env) []chaos.Rule
	// Prior are earlier tasks by the same agent, run (without chaos) and
	// recorded before the scenario's own task, e.g. to use up a daily limit.
	Prior []agent.Task
	// AfterSettlement runs once the final verdict is out, e.g. a payout
	// returned by the bank; a re-check follows.
	AfterSettlement func(ctx context.Context, env *Env) error
}

// DefaultAgent is the agent id of scenario tasks that name none.
const DefaultAgent = "agent-7"

// Env is what a scenario's hooks (AgentChaos, ExtractChaos,
// AfterSettlement) see of its live enterprise while it runs
// (sandbox/harness.Live holds it).
type Env struct {
	Enterprise *sandbox.Enterprise
	// Result is the main task's result, once the agent has run.
	Result agent.Result
}

// Operator is the enterprise's operator (for chaos actors and injections).
func (e *Env) Operator() *sandbox.Operator { return e.Enterprise.Operator() }

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
