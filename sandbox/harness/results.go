package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/oracle"
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
	// Repeat is k when each scenario ran k times (pass^k in the summary);
	// ReplayOf and Replay say what a replay replayed and how it went.
	Repeat   int            `json:"repeat,omitempty"`
	ReplayOf string         `json:"replay_of,omitempty"`
	Replay   *ReplaySummary `json:"replay,omitempty"`
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
	if res.ReplayOf != "" {
		return "replay" // never in place of the runs it replays
	}
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
func Refusals(calls []llm.Attempt) []string {
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
	if res.Replay = SummarizeReplay(sorted); res.Replay != nil {
		res.ReplayOf = res.Replay.Of
	}
	if len(res.Summary.PassK) > 0 {
		res.Repeat = res.Summary.PassK[0].K
	}
	if !finished.IsZero() {
		res.FinishedAt = finished.UTC()
		res.WallSeconds = finished.Sub(started).Seconds()
	}
	return res
}
