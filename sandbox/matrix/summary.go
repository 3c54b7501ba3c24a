package matrix

import "fmt"

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

// Group is the agreement of a group of rows (a business process or a family).
type Group struct {
	Name  string `json:"name"`
	Agree Count  `json:"agree"`
}

// Summary is a run's figures (latest.json's "summary"), computed from the
// rows by the harness (report.Summarize). A row with an error counts as a
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
	ByProcess     []Group  `json:"by_workflow"` // wire name kept
	ByFamily      []Group  `json:"by_family"`
	// PassK is pass^k per business process (and "all" overall) when the run
	// repeated its scenarios.
	PassK []PassK `json:"pass_k,omitempty"`
}

// PassK is one business process's pass^k over k attempts per scenario.
type PassK struct {
	// Process is a business process, or "all" (wire name "workflow").
	Process string `json:"workflow"`
	K       int    `json:"k"`
	// Agent counts scenarios whose k attempts all truly succeeded.
	Agent Count `json:"agent_pass_k"`
	// CommitLayer counts scenarios where CommitLayer gave the same verdict
	// and agreed with the oracle in all k attempts.
	CommitLayer Count `json:"commitlayer_consistent"`
}

// ReplaySummary is how a replay went: how many rows were replayed, how
// many recorded calls were re-executed and answered differently, and
// whether each verdict and agreement is the recorded one.
type ReplaySummary struct {
	Of   string `json:"of"`
	Rows int    `json:"rows"`
	// Calls re-executed, and those that answered differently from the
	// recording; FaithfulRows had none.
	Calls          int `json:"calls"`
	DivergentCalls int `json:"divergent_calls"`
	FaithfulRows   int `json:"faithful_rows"`
	// SameVerdict counts rows whose verdict (status and lenses) is the
	// recorded one; Changed lists the others. AgreedBefore and AgreeNow
	// count rows agreeing with the oracle in the recording and now.
	SameVerdict  int      `json:"same_verdict"`
	Changed      []string `json:"changed,omitempty"`
	AgreedBefore int      `json:"agreed_before"`
	AgreeNow     int      `json:"agree_now"`
}
