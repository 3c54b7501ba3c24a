// Package harness puts the sandbox to work: the failure matrix's scenarios
// (a fresh enterprise, an agent under chaos, CommitLayer's verdict, the
// oracle's truth), the steps that run one as Temporal activities, and the
// results (rows, summary, markdown and JSON).
package harness

import (
	"context"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

// Scenario is one row of the failure matrix. It never states the expected
// verdict: the oracle reads the systems' files and says what the truth was.
type Scenario struct {
	// ID is "workflow/injection", e.g. "refund/lost_response_retry_no_key".
	ID string
	// Workflow names the business process, one of the eight of
	// sandbox/business (rows keep the JSON name "workflow").
	Workflow string
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

// Env is one scenario's live enterprise while it runs.
type Env struct {
	Enterprise *sandbox.Enterprise
	// Result is the main task's result, once the agent has run.
	Result agent.Result
}

// Operator is the enterprise's operator (for chaos actors and injections).
func (e *Env) Operator() *sandbox.Operator { return e.Enterprise.Operator() }

// Row is one scenario's result. Its JSON shape is part of latest.json.
type Row struct {
	ID        string `json:"id"`
	Workflow  string `json:"workflow"`
	Injection string `json:"injection"`
	Family    string `json:"family"`
	Summary   string `json:"summary,omitempty"`

	Truth   RowTruth   `json:"truth"`
	Verdict RowVerdict `json:"verdict"`
	Agree   RowAgree   `json:"agree"`

	// Claim is the agent's report (success, failure).
	Claim string `json:"claim"`
	// AgentCalls counts the agent's tool call attempts.
	AgentCalls int `json:"agent_calls"`
	// Trajectory is what the agent did, as a trace-based evaluator sees it
	// (the task, every tool call attempt with its answer, the report, and
	// a model-driven agent's turns): what the judges read and what a
	// replay re-executes.
	Trajectory *llm.Trajectory `json:"trajectory,omitempty"`
	// LLM is a model-driven agent's provider, tokens and estimated cost.
	LLM *RowLLM `json:"llm,omitempty"`
	// Judges are the trace-only judges' verdicts on the agent's trajectory
	// (the rule judge on every row).
	Judges []JudgeVerdict `json:"judges,omitempty"`
	// Orphans are the subjects CommitLayer listed as orphan effects of the
	// scenario's contract; Stray are the subjects the oracle found effects
	// on without a recorded action (the truth for orphans).
	Orphans []commitlayer.Subject `json:"orphans"`
	Stray   []commitlayer.Subject `json:"stray"`
	// LatencyMS is end to end: from the action being recorded to its final
	// verdict (the store's clock).
	LatencyMS float64 `json:"latency_ms"`
	// PassLatencyMS is the worker's pass that gave the final verdict (pull,
	// read facts, evaluate, store), as stored with it; 0 when not measured.
	PassLatencyMS float64 `json:"pass_latency_ms,omitempty"`
	// Chaos is what the chaos transports did, in order.
	Chaos []string `json:"chaos,omitempty"`
	// Error is set when the scenario could not run to the end; such a row
	// counts as a disagreement.
	Error string `json:"error,omitempty"`
	// PriorRuns counts the earlier actions the scenario ran first;
	// AfterSettlement is true when something was injected after the
	// verdict settled (the final verdict is then the re-check's).
	PriorRuns       int  `json:"prior_runs,omitempty"`
	AfterSettlement bool `json:"after_settlement,omitempty"`
	// Refused lists the payments system's refusals of the agent's calls
	// ("POST /payments/refunds attempt 2: 400 charge_already_refunded"),
	// read from the recorded tool responses: on a Stripe backend, Stripe's.
	Refused []string `json:"refused,omitempty"`
	// Attempt numbers a repeated scenario's runs (--repeat; 0 when the
	// run did not repeat). Replay is set on a replayed row.
	Attempt int        `json:"attempt,omitempty"`
	Replay  *RowReplay `json:"replay,omitempty"`
}

// RowTruth is the oracle's truth for a row.
type RowTruth struct {
	Outcome commitlayer.Status `json:"outcome"`
	Policy  commitlayer.Status `json:"policy"`
	// Knowable is false when a system a lens needs was down at
	// verification and nothing reachable showed a failure; the lens is
	// then expected UNKNOWN.
	Knowable        bool     `json:"knowable"`
	OutcomeKnowable bool     `json:"outcome_knowable"`
	PolicyKnowable  bool     `json:"policy_knowable"`
	Reasons         []string `json:"reasons"`
	// Duplicate is true when the oracle saw an effect more than once.
	Duplicate bool `json:"duplicate"`
}

// RowVerdict is CommitLayer's verdict for a row: the final one, and the
// status of the first (provisional) one.
type RowVerdict struct {
	Status            commitlayer.Status    `json:"status"`
	ProvisionalStatus commitlayer.Status    `json:"provisional_status"`
	Lenses            commitlayer.Lenses    `json:"lenses"`
	Findings          []commitlayer.Finding `json:"findings"`
	ClaimContradicted bool                  `json:"claim_contradicted"`
	// Versions counts the verdict versions the action went through.
	Versions int `json:"versions"`
}

// RowAgree says, per lens, whether CommitLayer agreed with the oracle (the
// truth when knowable, UNKNOWN when not).
type RowAgree struct {
	Outcome bool `json:"outcome"`
	Policy  bool `json:"policy"`
}

// Both is true when both lenses agree.
func (a RowAgree) Both() bool { return a.Outcome && a.Policy }

// Duration of a row's latency.
func (r Row) Latency() time.Duration { return time.Duration(r.LatencyMS * float64(time.Millisecond)) }
