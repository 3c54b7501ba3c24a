// Package matrix is the benchmark's data model: one scenario's row (the
// oracle's truth, CommitLayer's verdict, whether they agree, the agent's
// claim and trajectory, the trace-only judges' verdicts), a run's results
// and their summary. The oracle, the harness, the benchmark workflows, the
// report, the sinks and `commitlayer check --results` all read and write
// these types; a results file (sandbox/results/latest.json) decodes into
// [Results] as it is.
//
// Statuses are [commitlayer.Status], claims [commitlayer.ClaimSuccess] and
// its siblings, the trajectory is [llm.Trajectory]: one type per concept,
// no twins converted into each other.
//
// Wire names: a row names its business process "workflow" (as every
// results file since the first does) while the Go field is Process; a
// row's Temporal workflow is WorkflowID.
package matrix

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// Row is one scenario's result. Its JSON shape is part of latest.json and
// of the benchmark's activity results in recorded histories.
type Row struct {
	ID string `json:"id"`
	// Process is the business process, one of sandbox/business's (wire
	// name "workflow", kept for the results files already written).
	Process   string `json:"workflow"`
	Injection string `json:"injection"`
	Family    string `json:"family"`
	Summary   string `json:"summary,omitempty"`

	Truth   Truth   `json:"truth"`
	Verdict Verdict `json:"verdict"`
	Agree   Agree   `json:"agree"`

	// Claim is the agent's report (commitlayer.ClaimSuccess, …).
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
	// WorkflowID and RunID name the scenario's Temporal workflow, for the
	// report's links; set when a stored run is rendered.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
}

// Truth is the oracle's truth for a row (sandbox/oracle states it).
type Truth struct {
	Outcome commitlayer.Status `json:"outcome"`
	Policy  commitlayer.Status `json:"policy"`
	// Knowable is false when a system a lens needs was down at
	// verification and nothing reachable showed a failure; the lens is
	// then expected UNKNOWN.
	Knowable        bool `json:"knowable"`
	OutcomeKnowable bool `json:"outcome_knowable"`
	PolicyKnowable  bool `json:"policy_knowable"`
	// Reasons are the facts behind a FAIL, each "lens system check:
	// message" (e.g. "outcome payments refund: no refund of o_1001").
	Reasons []string `json:"reasons"`
	// Duplicate is true when the oracle saw an effect more than once.
	Duplicate bool `json:"duplicate"`
}

// Lens is one lens's truth and whether a verifier could know it.
func (t Truth) Lens(lens commitlayer.Lens) (commitlayer.Status, bool) {
	if lens == commitlayer.LensPolicy {
		return t.Policy, t.PolicyKnowable
	}
	return t.Outcome, t.OutcomeKnowable
}

// Expected is what a correct verifier answers on a lens: the truth when it
// is knowable, UNKNOWN otherwise.
func (t Truth) Expected(lens commitlayer.Lens) commitlayer.Status {
	st, knowable := t.Lens(lens)
	if !knowable {
		return commitlayer.StatusUnknown
	}
	return st
}

// Status is the truth of the action as a whole: FAIL when a lens fails,
// PASS when both pass, UNKNOWN otherwise.
func (t Truth) Status() commitlayer.Status {
	switch {
	case t.Outcome == commitlayer.StatusFail || t.Policy == commitlayer.StatusFail:
		return commitlayer.StatusFail
	case t.Outcome == commitlayer.StatusPass && t.Policy == commitlayer.StatusPass:
		return commitlayer.StatusPass
	}
	return commitlayer.StatusUnknown
}

func (t Truth) String() string {
	var b strings.Builder
	for _, l := range []commitlayer.Lens{commitlayer.LensOutcome, commitlayer.LensPolicy} {
		st, knowable := t.Lens(l)
		fmt.Fprintf(&b, "%s=%s", l, st)
		if !knowable {
			b.WriteString("(unknowable)")
		}
		b.WriteString("; ")
	}
	for _, r := range t.Reasons {
		fmt.Fprintf(&b, "[%s] ", r)
	}
	return strings.TrimSuffix(strings.TrimSuffix(b.String(), " "), ";")
}

// Verdict is CommitLayer's verdict for a row: the final one, and the
// status of the first (provisional) one.
type Verdict struct {
	Status            commitlayer.Status    `json:"status"`
	ProvisionalStatus commitlayer.Status    `json:"provisional_status"`
	Lenses            commitlayer.Lenses    `json:"lenses"`
	Findings          []commitlayer.Finding `json:"findings"`
	ClaimContradicted bool                  `json:"claim_contradicted"`
	// Versions counts the verdict versions the action went through.
	Versions int `json:"versions"`
}

// Agree says, per lens, whether CommitLayer agreed with the oracle (the
// truth when knowable, UNKNOWN when not).
type Agree struct {
	Outcome bool `json:"outcome"`
	Policy  bool `json:"policy"`
}

// Both is true when both lenses agree.
func (a Agree) Both() bool { return a.Outcome && a.Policy }

// JudgeVerdict is a trace-only judge's answer on one row: what an
// evaluator that reads only the trajectory would have said.
type JudgeVerdict struct {
	Name    string             `json:"name"`
	Verdict commitlayer.Status `json:"verdict"`
	Reason  string             `json:"reason"`
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
	// Via is the path that recorded the agent's actions ("" direct: the
	// harness; "mcp": the MCP gateway; "otlp": the trace ingest);
	// ViaActions the actions it recorded, the task's first; NoAction is set
	// when none was the task's (no call of a bound tool was made).
	Via        string   `json:"via,omitempty"`
	ViaActions []string `json:"via_actions,omitempty"`
	NoAction   bool     `json:"no_action,omitempty"`
}

// Tokens is input plus output.
func (r RowLLM) Tokens() int64 { return r.InputTokens + r.OutputTokens }

// RowReplay says how a replayed row's trajectory went the second time: the
// recorded run it came from, how many recorded calls were re-executed and
// how many answered differently from the recording (0: the replay is
// faithful), and the recorded row's verdict and agreement, to compare.
type RowReplay struct {
	Of        string `json:"of"`
	Calls     int    `json:"calls"`
	Divergent int    `json:"divergent"`
	// Diffs describe the first divergent calls.
	Diffs []string `json:"diffs,omitempty"`
	// Recorded is the recorded row's final verdict and lenses; Agreed
	// whether it agreed with the oracle on both lenses.
	Recorded VerdictBrief `json:"recorded"`
	Agreed   bool         `json:"agreed"`
}

// VerdictBrief is a verdict's status and lenses.
type VerdictBrief struct {
	Status commitlayer.Status `json:"status"`
	Lenses commitlayer.Lenses `json:"lenses"`
}

// Latency is the row's end-to-end latency.
func (r Row) Latency() time.Duration { return time.Duration(r.LatencyMS * float64(time.Millisecond)) }

// Agrees is true when the row ran to the end and both lenses agree.
func (r Row) Agrees() bool { return r.Error == "" && r.Agree.Both() }

// HasCode reports whether the row's final verdict has a finding of code.
func (r Row) HasCode(code commitlayer.Code) bool {
	for _, f := range r.Verdict.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

// TrulySucceeded is true when the agent did what it was asked, as the
// oracle reads the systems of record: both lenses PASS (whether a verifier
// could know it is another matter) and the scenario ran to the end.
func (r Row) TrulySucceeded() bool {
	return r.Error == "" && r.Truth.Outcome == commitlayer.StatusPass && r.Truth.Policy == commitlayer.StatusPass
}

// SameVerdict reports whether the replayed row's verdict equals the
// recorded one's.
func (r Row) SameVerdict() bool {
	return r.Replay != nil && r.Replay.Recorded.Status == r.Verdict.Status && r.Replay.Recorded.Lenses == r.Verdict.Lenses
}

// Results is a run's results: the latest.json shape.
type Results struct {
	// ID is the run's id (its benchmark workflow's) when it was stored.
	ID          string    `json:"id,omitempty"`
	Commit      string    `json:"commit"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	WallSeconds float64   `json:"wall_seconds"`
	Concurrency int       `json:"concurrency"`
	// PaymentsBackend is the payments backend the run used: sandbox,
	// stripe-fake or stripe.
	PaymentsBackend string  `json:"payments_backend"`
	Summary         Summary `json:"summary"`
	Scenarios       []Row   `json:"scenarios"`
	// DiffersFromSandbox lists, for a Stripe run, the rows whose truth,
	// claim or refusals differ from the same scenario's row in the sandbox
	// run it was compared with.
	DiffersFromSandbox []string `json:"differs_from_sandbox,omitempty"`
	// ComparedWith names the sandbox run compared with (its commit).
	ComparedWith string `json:"compared_with,omitempty"`
	// Repeat is k when each scenario ran k times (pass^k in the summary);
	// ReplayOf and Replay say what a replay replayed and how it went.
	Repeat   int            `json:"repeat,omitempty"`
	ReplayOf string         `json:"replay_of,omitempty"`
	Replay   *ReplaySummary `json:"replay,omitempty"`
	// Figures are headline figures (e.g. "agree_both": 0.98) that the
	// evaluation sinks (sandbox/sinks) log as an experiment's metadata.
	Figures map[string]float64 `json:"figures,omitempty"`
}

// Decode reads a run's results from their JSON (latest.json's shape).
func Decode(data []byte) (Results, error) {
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		return Results{}, fmt.Errorf("decode results: %w", err)
	}
	return res, nil
}
