package report

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// BuildRow turns one scenario's run into its row: the oracle's truth and
// stray subjects, CommitLayer's first (provisional) and final verdicts and
// how many verdict versions the action went through, the subjects
// CommitLayer listed as orphans, the agent's claim and call count, the
// latency from recording to the final verdict, and the chaos log. Each
// lens agrees when the verdict equals the truth where it is knowable and
// is UNKNOWN where it is not.
func BuildRow(sc catalogue.Scenario, truth matrix.Truth, stray []commitlayer.Subject, provisional, final commitlayer.Verdict,
	versions int, orphans []commitlayer.Subject, claim string, calls int, latencyMS float64, chaosLog []string) matrix.Row {
	truth.Reasons = slices.Clone(truth.Reasons)
	if truth.Reasons == nil {
		truth.Reasons = []string{}
	}
	r := matrix.Row{
		ID: sc.ID, Process: sc.Process, Injection: sc.Injection, Family: sc.Family, Summary: sc.Summary,
		Truth: truth,
		Verdict: matrix.Verdict{
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
	r.Agree = matrix.Agree{
		Outcome: final.Lenses.Outcome == truth.Expected(commitlayer.LensOutcome),
		Policy:  final.Lenses.Policy == truth.Expected(commitlayer.LensPolicy),
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

// SetPayments sets the results' payments backend ("" is sandbox).
func SetPayments(r *matrix.Results, name string) {
	if name == "" {
		name = stripepay.NameSandbox
	}
	r.PaymentsBackend = name
}

// FileBase is the results files' name: "latest" for the sandbox matrix,
// "latest_stripe" for a run on a Stripe backend (stripe or stripe-fake).
func FileBase(res matrix.Results) string {
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
func CompareWithSandbox(res *matrix.Results, sandbox matrix.Results) {
	byID := map[string]matrix.Row{}
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
func NewResults(commit string, started, finished time.Time, concurrency int, rows []matrix.Row) matrix.Results {
	sorted := slices.Clone(rows)
	if sorted == nil {
		sorted = []matrix.Row{}
	}
	index := map[string]int{}
	for i, sc := range catalogue.Catalogue() {
		index[sc.ID] = i
	}
	pos := func(r matrix.Row) int {
		if i, ok := index[r.ID]; ok {
			return i
		}
		return len(index)
	}
	slices.SortStableFunc(sorted, func(a, b matrix.Row) int { return pos(a) - pos(b) })
	res := matrix.Results{Commit: commit, StartedAt: started.UTC(), Concurrency: concurrency,
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
