package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// Markdown renders the results: the summary table and the per-scenario
// table.
func Markdown(res matrix.Results) string {
	s := res.Summary
	var b strings.Builder
	b.WriteString("# Failure matrix results\n\n")
	// The headline: what reading the systems of record caught that reading
	// the trace did not.
	b.WriteString(JudgeMarkdown(res.Scenarios))
	b.WriteString("\n## CommitLayer against the oracle\n\n")
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
	row("End-to-end verify latency (action recorded → final verdict), mean / p99 / max", latencyCell(s.LatencyMeanMS, s.LatencyP99MS, s.LatencyMaxMS))
	row("Pass latency in the worker (pull, read facts, evaluate, store), mean / p99 / max", latencyCell(s.PassLatencyMeanMS, s.PassLatencyP99MS, s.PassLatencyMaxMS))
	row("Errors", fmt.Sprint(s.Errors))
	if len(s.Disagreements) > 0 {
		fmt.Fprintf(&b, "\nDisagreements: %s\n", strings.Join(s.Disagreements, ", "))
	}

	if backend != stripepay.NameSandbox {
		refusalsMarkdown(&b, res)
	}

	b.WriteString("\n## By workflow and family\n\n| group | agreement |\n|---|---|\n")
	for _, g := range s.ByProcess {
		fmt.Fprintf(&b, "| workflow %s | %s |\n", cell(g.Name), g.Agree)
	}
	for _, g := range s.ByFamily {
		fmt.Fprintf(&b, "| family %s | %s |\n", cell(g.Name), g.Agree)
	}
	replayMarkdown(&b, res.Replay, res.Scenarios)
	passKMarkdown(&b, s.PassK)

	b.WriteString("\n## Scenarios\n\n")
	b.WriteString("Truth is the oracle's, per lens (outcome/policy); \"?\" marks a lens a verifier could not know, where UNKNOWN is expected.\n\n")
	b.WriteString("| id | family | truth | verdict (first → final) | lenses | agree | findings | latency |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Scenarios {
		if r.Attempt > 0 {
			r.ID += fmt.Sprintf(" #%d", r.Attempt) // a repeated scenario's attempt
		}
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
func refusalsMarkdown(b *strings.Builder, res matrix.Results) {
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
