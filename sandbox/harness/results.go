package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/oracle"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// BuildRow turns one scenario's run into its row: the oracle's truth and
// stray subjects, CommitLayer's first (provisional) and final verdicts and
// how many verdict versions the action went through, the subjects
// CommitLayer listed as orphans, the agent's claim and call count, the
// latency from recording to the final verdict, and the chaos log. Each
// lens agrees when the verdict equals the truth where it is knowable and
// is UNKNOWN where it is not.
func BuildRow(sc Scenario, truth oracle.Truth, stray []commitlayer.Subject, provisional, final commitlayer.Verdict,
	versions int, orphans []commitlayer.Subject, claim string, calls int, latencyMS float64, chaosLog []string) Row {
	r := Row{
		ID: sc.ID, Workflow: sc.Workflow, Injection: sc.Injection, Family: sc.Family, Summary: sc.Summary,
		Truth: RowTruth{
			Outcome:         truth.Outcome.Status,
			Policy:          truth.Policy.Status,
			Knowable:        truth.Knowable(),
			OutcomeKnowable: truth.Outcome.Knowable,
			PolicyKnowable:  truth.Policy.Knowable,
			Reasons:         []string{},
		},
		Verdict: RowVerdict{
			Status:            final.Status,
			ProvisionalStatus: provisional.Status,
			Lenses:            final.Lenses,
			Findings:          slices.Clone(final.Findings),
			ClaimContradicted: final.ClaimContradicted,
			Versions:          versions,
		},
		Claim:           claim,
		AgentCalls:      calls,
		Orphans:         sortedSubjects(orphans),
		Stray:           sortedSubjects(stray),
		LatencyMS:       latencyMS,
		Chaos:           slices.Clone(chaosLog),
		PriorRuns:       len(sc.Prior),
		AfterSettlement: sc.AfterSettlement != nil,
	}
	if r.Verdict.Findings == nil {
		r.Verdict.Findings = []commitlayer.Finding{}
	}
	for _, l := range []struct {
		name string
		lt   oracle.LensTruth
	}{{"outcome", truth.Outcome}, {"policy", truth.Policy}} {
		for _, reason := range l.lt.Reasons {
			r.Truth.Reasons = append(r.Truth.Reasons, fmt.Sprintf("%s %s %s: %s", l.name, reason.System, reason.Check, reason.Message))
			if l.name == "outcome" && reason.Duplicate {
				r.Truth.Duplicate = true
			}
		}
	}
	r.Agree = RowAgree{
		Outcome: final.Lenses.Outcome == truth.Outcome.Expected(),
		Policy:  final.Lenses.Policy == truth.Policy.Expected(),
	}
	return r
}

func sortedSubjects(in []commitlayer.Subject) []commitlayer.Subject {
	out := make([]commitlayer.Subject, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// expected is what a correct verifier answers on a lens of the row.
func (r Row) expected(lens commitlayer.Lens) commitlayer.Status {
	st, knowable := r.Truth.Outcome, r.Truth.OutcomeKnowable
	if lens == commitlayer.LensPolicy {
		st, knowable = r.Truth.Policy, r.Truth.PolicyKnowable
	}
	if !knowable {
		return commitlayer.StatusUnknown
	}
	return st
}

func (r Row) truthOf(lens commitlayer.Lens) (commitlayer.Status, bool) {
	if lens == commitlayer.LensPolicy {
		return r.Truth.Policy, r.Truth.PolicyKnowable
	}
	return r.Truth.Outcome, r.Truth.OutcomeKnowable
}

// Agrees is true when the row ran to the end and both lenses agree.
func (r Row) Agrees() bool { return r.Error == "" && r.Agree.Both() }

func (r Row) hasCode(code commitlayer.Code) bool {
	for _, f := range r.Verdict.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

var lenses = []commitlayer.Lens{commitlayer.LensOutcome, commitlayer.LensPolicy}

// Count is n out of a total.
type Count struct {
	N  int `json:"n"`
	Of int `json:"of"`
}

func (c Count) String() string { return fmt.Sprintf("%d/%d", c.N, c.Of) }

func (c *Count) add(in, hit bool) {
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

// Summary is every figure of the results table, computed from the rows.
// A row with an error counts as a disagreement on both lenses and is left
// out of the figures that read the truth.
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
	// Verify latency over the rows that ran to the end.
	LatencyMeanMS float64 `json:"latency_mean_ms"`
	LatencyMaxMS  float64 `json:"latency_max_ms"`
	Errors        int     `json:"errors"`
	// Disagreements lists the ids of rows that did not agree on both
	// lenses (errors included).
	Disagreements []string `json:"disagreements"`
	ByWorkflow    []Group  `json:"by_workflow"`
	ByFamily      []Group  `json:"by_family"`
}

// Summarize computes the summary of rows.
func Summarize(rows []Row) Summary {
	s := Summary{Scenarios: len(rows), Disagreements: []string{}}
	workflows, families := map[string]*Count{}, map[string]*Count{}
	var wfOrder, famOrder []string
	group := func(m map[string]*Count, order *[]string, name string) *Count {
		c, ok := m[name]
		if !ok {
			c = &Count{}
			m[name] = c
			*order = append(*order, name)
		}
		return c
	}
	var latencySum float64
	ran := 0
	for _, r := range rows {
		ok := r.Error == ""
		s.AgreeOutcome.add(true, ok && r.Agree.Outcome)
		s.AgreePolicy.add(true, ok && r.Agree.Policy)
		s.AgreeBoth.add(true, r.Agrees())
		group(workflows, &wfOrder, r.Workflow).add(true, r.Agrees())
		group(families, &famOrder, r.Family).add(true, r.Agrees())
		if !r.Agrees() {
			s.Disagreements = append(s.Disagreements, r.ID)
		}
		if !ok {
			s.Errors++
			continue
		}
		ran++
		latencySum += r.LatencyMS
		s.LatencyMaxMS = max(s.LatencyMaxMS, r.LatencyMS)

		var knownFail, anyFail, falseNeg, anyPass, falsePos, unknowable bool
		detected, reportedUnknown := true, true
		for _, l := range lenses {
			truth, knowable := r.truthOf(l)
			got := r.Verdict.Lenses.Get(l)
			switch truth {
			case commitlayer.StatusFail:
				anyFail = true
				falseNeg = falseNeg || got == commitlayer.StatusPass
				if knowable {
					knownFail = true
					detected = detected && got == commitlayer.StatusFail
				}
			case commitlayer.StatusPass:
				anyPass = true
				falsePos = falsePos || got == commitlayer.StatusFail
			}
			if !knowable {
				unknowable = true
				reportedUnknown = reportedUnknown && got == commitlayer.StatusUnknown
			}
		}
		s.TrueFailures.add(knownFail, detected)
		s.FalseNegatives.add(anyFail, falseNeg)
		s.FalsePositives.add(anyPass, falsePos)
		if r.expected(commitlayer.LensOutcome) == commitlayer.StatusPass && r.expected(commitlayer.LensPolicy) == commitlayer.StatusPass {
			s.TruePasses++
		}
		s.UnknownWhenUnknowable.add(unknowable, reportedUnknown)
		s.FalseClaimsCaught.add(r.Claim == commitlayer.ClaimSuccess && r.expected(commitlayer.LensOutcome) == commitlayer.StatusFail,
			r.Verdict.Lenses.Outcome == commitlayer.StatusFail)
		s.DuplicatesDetected.add(r.Truth.Duplicate, r.hasCode(commitlayer.CodeDuplicateEffect))
		s.CorrectedAtRecheck.add(!r.AfterSettlement && r.Verdict.ProvisionalStatus != "" && r.Verdict.ProvisionalStatus != r.Verdict.Status,
			r.Agree.Both())
		s.ReversalsCaught.add(r.AfterSettlement && r.expected(commitlayer.LensOutcome) == commitlayer.StatusFail,
			r.hasCode(commitlayer.CodeEffectReversed))
		for _, st := range r.Stray {
			s.OrphansFlagged.add(true, slices.Contains(r.Orphans, st))
		}
		for _, o := range r.Orphans {
			if !slices.Contains(r.Stray, o) {
				s.OrphanFalseAlarms++
			}
		}
	}
	if ran > 0 {
		s.LatencyMeanMS = latencySum / float64(ran)
	}
	for _, name := range ordered(wfOrder, business.Names()) {
		s.ByWorkflow = append(s.ByWorkflow, Group{Name: name, Agree: *workflows[name]})
	}
	for _, name := range ordered(famOrder, FamilyNames()) {
		s.ByFamily = append(s.ByFamily, Group{Name: name, Agree: *families[name]})
	}
	if s.ByWorkflow == nil {
		s.ByWorkflow = []Group{}
	}
	if s.ByFamily == nil {
		s.ByFamily = []Group{}
	}
	return s
}

// ordered returns names in the order of known, then the others in the
// order seen.
func ordered(seen, known []string) []string {
	out := make([]string, 0, len(seen))
	for _, k := range known {
		if slices.Contains(seen, k) {
			out = append(out, k)
		}
	}
	for _, n := range seen {
		if !slices.Contains(known, n) {
			out = append(out, n)
		}
	}
	return out
}

// Results is a run's results: the latest.json shape.
type Results struct {
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
	// run it was compared with (CompareWithSandbox).
	DiffersFromSandbox []string `json:"differs_from_sandbox,omitempty"`
	// ComparedWith names the sandbox run compared with (its commit).
	ComparedWith string `json:"compared_with,omitempty"`
}

// SetPayments sets the results' payments backend ("" is sandbox).
func (r *Results) SetPayments(name string) {
	if name == "" {
		name = stripepay.NameSandbox
	}
	r.PaymentsBackend = name
}

// FileBase is the results files' name: "latest" for the sandbox matrix,
// "latest_stripe" for a run on a Stripe backend (stripe or stripe-fake).
func FileBase(res Results) string {
	if res.PaymentsBackend == "" || res.PaymentsBackend == stripepay.NameSandbox {
		return "latest"
	}
	return "latest_stripe"
}

// stripeMark ends a refusal that Stripe made: the Stripe backend names
// Stripe in the message of every refusal it passes on (sandbox/stripepay),
// while the sandbox's own checks and the chaos transport never do.
const stripeMark = " (Stripe)"

// Refusals lists the payments system's 4xx answers to the agent's calls
// (429 aside, which is load, not a refusal) with the error code the
// response carried, e.g. "POST /payments/refunds attempt 2: 400
// charge_already_refunded (Stripe)", marked (Stripe) when Stripe refused.
func Refusals(calls []agent.Call) []string {
	var out []string
	for _, c := range calls {
		if !strings.HasPrefix(c.Path, "/payments/") || c.Status < 400 || c.Status >= 500 || c.Status == http.StatusTooManyRequests {
			continue
		}
		var body struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		code, by := "(no code)", ""
		if json.Unmarshal([]byte(c.Response), &body) == nil {
			if body.Error.Code != "" {
				code = body.Error.Code
			}
			if strings.Contains(body.Error.Message, "Stripe") {
				by = stripeMark
			}
		}
		out = append(out, fmt.Sprintf("%s %s attempt %d: %d %s%s", c.Method, c.Path, c.Attempt, c.Status, code, by))
	}
	return out
}

// CompareWithSandbox lists in res the rows whose oracle truth, agent claim
// or refusals differ from the same scenario's row of sandbox (the sandbox
// matrix's results): the outcomes a Stripe backend changed. Refusals are
// compared only when sandbox's results record them (they carry
// payments_backend).
func CompareWithSandbox(res *Results, sandbox Results) {
	byID := map[string]Row{}
	for _, r := range sandbox.Scenarios {
		byID[r.ID] = r
	}
	res.DiffersFromSandbox = nil
	res.ComparedWith = "sandbox run of commit " + sandbox.Commit + " started " + sandbox.StartedAt.UTC().Format(time.RFC3339)
	if sandbox.PaymentsBackend == "" {
		res.ComparedWith += " (truth and claims; its results predate recorded refusals)"
	}
	for _, r := range res.Scenarios {
		sb, ok := byID[r.ID]
		if !ok || r.Error != "" || sb.Error != "" {
			continue
		}
		var diffs []string
		if r.Truth.Outcome != sb.Truth.Outcome || r.Truth.Policy != sb.Truth.Policy {
			diffs = append(diffs, fmt.Sprintf("truth %s/%s (sandbox %s/%s)", r.Truth.Outcome, r.Truth.Policy, sb.Truth.Outcome, sb.Truth.Policy))
		}
		if r.Claim != sb.Claim {
			diffs = append(diffs, fmt.Sprintf("agent claimed %s (sandbox %s)", r.Claim, sb.Claim))
		}
		if sandbox.PaymentsBackend != "" && strings.Join(r.Refused, ";") != strings.Join(sb.Refused, ";") {
			diffs = append(diffs, fmt.Sprintf("refused %q (sandbox %q)", r.Refused, sb.Refused))
		}
		if len(diffs) > 0 {
			res.DiffersFromSandbox = append(res.DiffersFromSandbox, r.ID+": "+strings.Join(diffs, ", "))
		}
	}
}

// NewResults builds a run's results from its rows, summary included. The
// rows are put in catalogue order (rows of ids the catalogue does not know
// last, as given), whatever order the scenarios finished in.
func NewResults(commit string, started, finished time.Time, concurrency int, rows []Row) Results {
	sorted := slices.Clone(rows)
	if sorted == nil {
		sorted = []Row{}
	}
	index := map[string]int{}
	for i, sc := range Catalogue() {
		index[sc.ID] = i
	}
	pos := func(r Row) int {
		if i, ok := index[r.ID]; ok {
			return i
		}
		return len(index)
	}
	slices.SortStableFunc(sorted, func(a, b Row) int { return pos(a) - pos(b) })
	res := Results{Commit: commit, StartedAt: started.UTC(), Concurrency: concurrency,
		PaymentsBackend: stripepay.NameSandbox, Summary: Summarize(sorted), Scenarios: sorted}
	if !finished.IsZero() {
		res.FinishedAt = finished.UTC()
		res.WallSeconds = finished.Sub(started).Seconds()
	}
	return res
}

// Markdown renders the results: the summary table and the per-scenario
// table.
func Markdown(res Results) string {
	s := res.Summary
	var b strings.Builder
	b.WriteString("# Failure matrix results\n\n")
	// The headline: what reading the systems of record caught that reading
	// the trace did not.
	if run, err := reportRun(res); err == nil {
		b.WriteString(report.JudgeMarkdown(run.Scenarios))
		b.WriteString("\n## CommitLayer against the oracle\n\n")
	}
	commit := res.Commit
	if commit == "" {
		commit = "(unknown)"
	}
	fmt.Fprintf(&b, "Commit `%s` · started %s", commit, res.StartedAt.UTC().Format(time.RFC3339))
	if !res.FinishedAt.IsZero() {
		fmt.Fprintf(&b, " · %d scenarios in %.1f s", s.Scenarios, res.WallSeconds)
	}
	if res.Concurrency > 0 {
		fmt.Fprintf(&b, " · concurrency %d", res.Concurrency)
	}
	backend := res.PaymentsBackend
	if backend == "" {
		backend = stripepay.NameSandbox
	}
	fmt.Fprintf(&b, " · payments_backend `%s`", backend)
	b.WriteString("\n\n")
	if backend != stripepay.NameSandbox {
		fmt.Fprintf(&b, "%s.\n\n", stripepay.Notice)
	}
	fmt.Fprintf(&b, "Scenarios: %d · outcome-lens agreement with the oracle: %s · policy-lens agreement: %s · both: %s\n\n",
		s.Scenarios, s.AgreeOutcome, s.AgreePolicy, s.AgreeBoth)

	b.WriteString("| Metric | Value |\n|---|---|\n")
	row := func(metric, value string) { fmt.Fprintf(&b, "| %s | %s |\n", metric, value) }
	row("True failures detected", s.TrueFailures.String())
	row("False negatives (verifier PASS, truth FAIL)", fmt.Sprintf("%d of %d with a failing lens", s.FalseNegatives.N, s.FalseNegatives.Of))
	row("False positives (verifier FAIL, truth PASS)", fmt.Sprintf("%d of %d with a passing lens (%d true passes)", s.FalsePositives.N, s.FalsePositives.Of, s.TruePasses))
	row("UNKNOWN reported when the truth is unknowable (required system down)", s.UnknownWhenUnknowable.String())
	row("Agent claimed success falsely — caught", s.FalseClaimsCaught.String())
	row("Duplicate effects detected", s.DuplicatesDetected.String())
	row("Provisional verdicts corrected by the settlement re-check", s.CorrectedAtRecheck.String())
	row("Reversals after settlement caught", s.ReversalsCaught.String())
	row("Effects on a subject with no recorded action", fmt.Sprintf("%s flagged, %d false alarms", s.OrphansFlagged, s.OrphanFalseAlarms))
	row("Verify latency, mean / max", fmt.Sprintf("%.0f ms / %.0f ms", s.LatencyMeanMS, s.LatencyMaxMS))
	row("Errors", fmt.Sprint(s.Errors))
	if len(s.Disagreements) > 0 {
		fmt.Fprintf(&b, "\nDisagreements: %s\n", strings.Join(s.Disagreements, ", "))
	}

	if backend != stripepay.NameSandbox {
		refusalsMarkdown(&b, res)
	}

	b.WriteString("\n## By workflow and family\n\n| group | agreement |\n|---|---|\n")
	for _, g := range s.ByWorkflow {
		fmt.Fprintf(&b, "| workflow %s | %s |\n", cell(g.Name), g.Agree)
	}
	for _, g := range s.ByFamily {
		fmt.Fprintf(&b, "| family %s | %s |\n", cell(g.Name), g.Agree)
	}

	b.WriteString("\n## Scenarios\n\n")
	b.WriteString("Truth is the oracle's, per lens (outcome/policy); \"?\" marks a lens a verifier could not know, where UNKNOWN is expected.\n\n")
	b.WriteString("| id | family | truth | verdict (first → final) | lenses | agree | findings | latency |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Scenarios {
		if r.Error != "" {
			fmt.Fprintf(&b, "| %s | %s | | | | **no** | error: %s | |\n", cell(r.ID), cell(r.Family), cell(r.Error))
			continue
		}
		truth := func(st commitlayer.Status, knowable bool) string {
			if !knowable {
				return string(st) + "?"
			}
			return string(st)
		}
		agree := "yes"
		if !r.Agree.Both() {
			var bad []string
			if !r.Agree.Outcome {
				bad = append(bad, "outcome")
			}
			if !r.Agree.Policy {
				bad = append(bad, "policy")
			}
			agree = "**no** (" + strings.Join(bad, ", ") + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s/%s | %s → %s | %s/%s | %s | %s | %.0f ms |\n",
			cell(r.ID), cell(r.Family),
			truth(r.Truth.Outcome, r.Truth.OutcomeKnowable), truth(r.Truth.Policy, r.Truth.PolicyKnowable),
			r.Verdict.ProvisionalStatus, r.Verdict.Status, r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy,
			agree, cell(mainFindings(r.Verdict.Findings)), r.LatencyMS)
	}
	return b.String()
}

// refusalsMarkdown lists the scenarios whose agent Stripe refused, with
// the reason read from the recorded tool responses, and the rows that
// differ from the sandbox run compared with.
func refusalsMarkdown(b *strings.Builder, res Results) {
	b.WriteString("\n## Refused by Stripe\n\n")
	b.WriteString("Scenarios where Stripe refused an agent's call (read from the recorded tool responses); their outcomes are real outcomes, not skipped.\n\n")
	n := 0
	var other []string
	for _, r := range res.Scenarios {
		var byStripe, byOthers []string
		for _, f := range r.Refused {
			if strings.HasSuffix(f, stripeMark) {
				byStripe = append(byStripe, f)
			} else {
				byOthers = append(byOthers, f)
			}
		}
		if len(byOthers) > 0 {
			other = append(other, r.ID+": "+strings.Join(byOthers, "; "))
		}
		if len(byStripe) == 0 {
			continue
		}
		if n == 0 {
			b.WriteString("| id | Stripe refused | agent's claim | truth | agree |\n|---|---|---|---|---|\n")
		}
		n++
		agree := "yes"
		if !r.Agrees() {
			agree = "**no**"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s/%s | %s |\n", cell(r.ID), cell(strings.Join(byStripe, "; ")),
			cell(r.Claim), r.Truth.Outcome, r.Truth.Policy, agree)
	}
	if n == 0 {
		b.WriteString("None: Stripe refused none of the agents' calls.\n")
	}
	if len(other) > 0 {
		b.WriteString("\nRefusals of the agents' payments calls that were not Stripe's (the sandbox's own checks, or injected by the chaos transport):\n\n")
		for _, o := range other {
			fmt.Fprintf(b, "- %s\n", cell(o))
		}
	}
	if res.ComparedWith != "" {
		fmt.Fprintf(b, "\nCompared with the %s: ", res.ComparedWith)
		if len(res.DiffersFromSandbox) == 0 {
			b.WriteString("no scenario's truth, claim or refusals differ.\n")
		} else {
			b.WriteString("these differ.\n\n")
			for _, d := range res.DiffersFromSandbox {
				fmt.Fprintf(b, "- %s\n", cell(d))
			}
		}
	}
}

// mainFindings names a verdict's findings as "code check", each once.
func mainFindings(fs []commitlayer.Finding) string {
	var out []string
	for _, f := range fs {
		s := string(f.Code) + " " + f.Check
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}

// cell makes text safe in a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// WriteFiles writes latest.json, latest.md and latest.html into dir
// (created when missing), or latest_stripe.* for a run on a Stripe backend
// (FileBase). Each file is written whole or not at all.
func WriteFiles(dir string, res Results) error {
	base := FileBase(res)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("write results: encode: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, base+".json"), append(js, '\n')); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, base+".md"), []byte(Markdown(res))); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	run, err := reportRun(res)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	page, err := report.HTML(run, report.Options{})
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, base+".html"), page); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := firstErr(werr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
