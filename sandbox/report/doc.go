// Package report renders a benchmark run for people: one self-contained
// HTML file (inline CSS and SVG, no external assets) with the summary, the
// trace-only judges versus CommitLayer as the headline, charts (agreement
// by failure family, verify latency, pass^k) and every scenario with its
// findings and a link to its workflow in the Temporal UI; and the
// judge-versus-CommitLayer table in markdown, which opens latest.md.
//
// Its input types mirror latest.json (the same JSON names), so a results
// file decodes into a [Run] as it is; the benchmark maps its own rows into
// them.
package report

import (
	"encoding/json"
	"fmt"
	"time"
)

// Statuses of verdicts, truths and judges.
const (
	StatusPass    = "PASS"
	StatusFail    = "FAIL"
	StatusUnknown = "UNKNOWN"
)

// Run is one benchmark run's results.
type Run struct {
	// ID is the run's id (its benchmark workflow's).
	ID          string    `json:"id,omitempty"`
	Commit      string    `json:"commit"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	WallSeconds float64   `json:"wall_seconds"`
	Concurrency int       `json:"concurrency"`
	// Payments is the payments backend (sandbox, stripe, stripe-fake).
	Payments string `json:"payments,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Repeat is k when each scenario ran k times.
	Repeat int `json:"repeat,omitempty"`
	// ReplayOf is the run this one replays, if any.
	ReplayOf string `json:"replay_of,omitempty"`
	// Replay is how the replay went (harness.ReplaySummary's figures).
	Replay *ReplayFigures `json:"replay,omitempty"`
	// Figures are headline figures (e.g. "agree_both": 0.98) that the
	// evaluation sinks (sandbox/sinks) log as an experiment's metadata; the
	// harness's results do not carry them.
	Figures   map[string]float64 `json:"figures,omitempty"`
	Summary   Summary            `json:"summary"`
	Scenarios []Row              `json:"scenarios"`
}

// ReplayFigures are a replay's figures: rows replayed, calls re-executed
// and those answering differently, rows with none, verdicts as recorded.
type ReplayFigures struct {
	Rows           int `json:"rows"`
	Calls          int `json:"calls"`
	DivergentCalls int `json:"divergent_calls"`
	FaithfulRows   int `json:"faithful_rows"`
	SameVerdict    int `json:"same_verdict"`
}

// Count is n out of a total.
type Count struct {
	N  int `json:"n"`
	Of int `json:"of"`
}

func (c Count) String() string { return fmt.Sprintf("%d/%d", c.N, c.Of) }

// Rate is N/Of, 0 when Of is 0.
func (c Count) Rate() float64 {
	if c.Of == 0 {
		return 0
	}
	return float64(c.N) / float64(c.Of)
}

// Add counts one case: it is in the total when in, and among the n
// when it is in and hit.
func (c *Count) Add(in, hit bool) {
	if in {
		c.Of++
		if hit {
			c.N++
		}
	}
}

// Group is the agreement of a group of rows (a workflow or a family).
type Group struct {
	Name  string `json:"name"`
	Agree Count  `json:"agree"`
}

// Summary is a run's figures (latest.json's "summary"), computed from the
// rows by the harness (harness.Summarize). A row with an error counts as a
// disagreement on both lenses and is left out of the figures that read the
// truth.
type Summary struct {
	Scenarios int `json:"scenarios"`
	// Agreement per lens and on both.
	AgreeOutcome Count `json:"agree_outcome"`
	AgreePolicy  Count `json:"agree_policy"`
	AgreeBoth    Count `json:"agree_both"`
	// TrueFailures: rows with a FAIL the verifier could know on some lens;
	// detected when the verdict is FAIL on every such lens.
	TrueFailures Count `json:"true_failures_detected"`
	// FalseNegatives: rows where a lens the truth FAILs was PASSed, out of
	// rows with a failing lens.
	FalseNegatives Count `json:"false_negatives"`
	// FalsePositives: rows where a lens the truth PASSes was FAILed, out
	// of rows with a passing lens; TruePasses: rows that PASS on both
	// lenses, knowably.
	FalsePositives Count `json:"false_positives"`
	TruePasses     int   `json:"true_passes"`
	// UnknownWhenUnknowable: rows with a lens whose truth could not be
	// known; hit when every such lens was UNKNOWN.
	UnknownWhenUnknowable Count `json:"unknown_when_unknowable"`
	// FalseClaimsCaught: the agent claimed success and the outcome truth
	// is a knowable FAIL; caught when the verdict's outcome is FAIL.
	FalseClaimsCaught Count `json:"false_claims_caught"`
	// DuplicatesDetected: the oracle saw an effect more than once; hit
	// when the verdict has a duplicate_effect finding.
	DuplicatesDetected Count `json:"duplicates_detected"`
	// CorrectedAtRecheck: rows without an after-settlement injection whose
	// first verdict's status differs from the final one; hit when the
	// final verdict agrees on both lenses.
	CorrectedAtRecheck Count `json:"corrected_at_recheck"`
	// ReversalsCaught: rows with an after-settlement injection whose
	// outcome truth is a knowable FAIL; hit when the final verdict has an
	// effect_reversed finding.
	ReversalsCaught Count `json:"reversals_caught"`
	// OrphansFlagged: stray subjects (the oracle's) that CommitLayer listed
	// as orphans; OrphanFalseAlarms: listed subjects that are not stray.
	OrphansFlagged    Count `json:"orphans_flagged"`
	OrphanFalseAlarms int   `json:"orphan_false_alarms"`
	// End-to-end verify latency (action recorded → first final verdict,
	// the store's clock) over the rows that ran to the end.
	LatencyMeanMS float64 `json:"latency_mean_ms"`
	LatencyP99MS  float64 `json:"latency_p99_ms,omitempty"`
	LatencyMaxMS  float64 `json:"latency_max_ms"`
	// Pass latency: the worker's pass that gave each row's final verdict
	// (pull, read facts, evaluate, store), over the rows that measured it.
	PassLatencyMeanMS float64 `json:"pass_latency_mean_ms,omitempty"`
	PassLatencyP99MS  float64 `json:"pass_latency_p99_ms,omitempty"`
	PassLatencyMaxMS  float64 `json:"pass_latency_max_ms,omitempty"`
	Errors            int     `json:"errors"`
	// Disagreements lists the ids of rows that did not agree on both
	// lenses (errors included).
	Disagreements []string `json:"disagreements"`
	ByWorkflow    []Group  `json:"by_workflow"`
	ByFamily      []Group  `json:"by_family"`
	// PassK is pass^k per workflow (and "all" overall) when the run
	// repeated its scenarios.
	PassK []PassK `json:"pass_k,omitempty"`
}

// PassK is one workflow's pass^k over k attempts per scenario.
type PassK struct {
	// Workflow is a workflow's name, or "all".
	Workflow string `json:"workflow"`
	K        int    `json:"k"`
	// Agent counts scenarios whose k attempts all truly succeeded.
	Agent Count `json:"agent_pass_k"`
	// CommitLayer counts scenarios where CommitLayer gave the same verdict
	// and agreed with the oracle in all k attempts.
	CommitLayer Count `json:"commitlayer_consistent"`
}

// Row is one scenario's result.
type Row struct {
	ID        string `json:"id"`
	Workflow  string `json:"workflow"`
	Injection string `json:"injection"`
	Family    string `json:"family"`
	Summary   string `json:"summary,omitempty"`
	// Attempt numbers repeated runs of a scenario, from 1 (0: ran once).
	Attempt int `json:"attempt,omitempty"`

	Truth   Truth   `json:"truth"`
	Verdict Verdict `json:"verdict"`
	Agree   Agree   `json:"agree"`
	// Claim is the agent's report (success, failure).
	Claim  string  `json:"claim"`
	Judges []Judge `json:"judges,omitempty"`
	// Trajectory is what the agent did; the report does not read it.
	Trajectory json.RawMessage `json:"trajectory,omitempty"`
	LatencyMS  float64         `json:"latency_ms"`
	Error      string          `json:"error,omitempty"`
	// WorkflowID and RunID name the scenario's Temporal workflow.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
}

// Truth is the oracle's truth for a row.
type Truth struct {
	Outcome         string   `json:"outcome"`
	Policy          string   `json:"policy"`
	Knowable        bool     `json:"knowable"`
	OutcomeKnowable bool     `json:"outcome_knowable"`
	PolicyKnowable  bool     `json:"policy_knowable"`
	Reasons         []string `json:"reasons,omitempty"`
}

// Status is the truth of the action as a whole: FAIL when a lens fails,
// PASS when both pass, UNKNOWN otherwise.
func (t Truth) Status() string {
	switch {
	case t.Outcome == StatusFail || t.Policy == StatusFail:
		return StatusFail
	case t.Outcome == StatusPass && t.Policy == StatusPass:
		return StatusPass
	}
	return StatusUnknown
}

// Verdict is CommitLayer's verdict for a row.
type Verdict struct {
	Status            string    `json:"status"`
	ProvisionalStatus string    `json:"provisional_status"`
	Lenses            Lenses    `json:"lenses"`
	Findings          []Finding `json:"findings"`
}

// Lenses are a verdict's per-lens statuses.
type Lenses struct {
	Outcome string `json:"outcome"`
	Policy  string `json:"policy"`
}

// Finding is one finding of a verdict.
type Finding struct {
	Code    string `json:"code"`
	Check   string `json:"check"`
	Lens    string `json:"lens"`
	Message string `json:"message"`
}

// Agree says, per lens, whether CommitLayer agreed with the oracle (the
// truth where knowable, UNKNOWN where not).
type Agree struct {
	Outcome bool `json:"outcome"`
	Policy  bool `json:"policy"`
}

// Judge is one trace-only judge's verdict on a row.
type Judge struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// Agrees is true when the row ran to the end and both lenses agree.
func (r Row) Agrees() bool { return r.Error == "" && r.Agree.Outcome && r.Agree.Policy }

// Decode reads a run from its JSON (latest.json's shape).
func Decode(data []byte) (Run, error) {
	var run Run
	if err := json.Unmarshal(data, &run); err != nil {
		return Run{}, fmt.Errorf("decode run: %w", err)
	}
	return run, nil
}
