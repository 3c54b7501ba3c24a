package harness

import (
	"context"

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
