package report

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

const (
	P = commitlayer.StatusPass
	F = commitlayer.StatusFail
	U = commitlayer.StatusUnknown
)

// lensesTruth is the oracle's truth with the given lenses, as oracle.Truth
// states it.
func lensesTruth(outcome commitlayer.Status, outcomeKnowable bool, policy commitlayer.Status, policyKnowable bool, reasons ...string) matrix.Truth {
	if reasons == nil {
		reasons = []string{}
	}
	return matrix.Truth{Outcome: outcome, OutcomeKnowable: outcomeKnowable, Policy: policy, PolicyKnowable: policyKnowable,
		Knowable: outcomeKnowable && policyKnowable, Reasons: reasons}
}

func verdict(outcome, policy commitlayer.Status, codes ...commitlayer.Code) commitlayer.Verdict {
	v := commitlayer.Verdict{Lenses: commitlayer.Lenses{Outcome: outcome, Policy: policy},
		Status: commitlayer.Worse(outcome, policy)}
	for _, c := range codes {
		v.Findings = append(v.Findings, commitlayer.Finding{Code: c, Check: "x", Lens: commitlayer.LensOutcome})
	}
	return v
}

func TestBuildRow(t *testing.T) {
	sc := lookup(t, "payout/returned_after_settlement")
	dup := lensesTruth(F, true, P, true, "outcome ledger payout: 2 payouts")
	dup.Duplicate = true
	cases := []struct {
		name        string
		truth       matrix.Truth
		final       commitlayer.Verdict
		agree       matrix.Agree
		knowable    bool
		duplicate   bool
		reasonsLike []string
	}{
		{name: "pass agrees with pass", truth: lensesTruth(P, true, P, true),
			final: verdict(P, P), agree: matrix.Agree{Outcome: true, Policy: true}, knowable: true},
		{name: "fail on outcome only", truth: dup,
			final: verdict(F, P), agree: matrix.Agree{Outcome: true, Policy: true}, knowable: true, duplicate: true,
			reasonsLike: []string{"outcome ledger payout: 2 payouts"}},
		{name: "a verdict that misses the failure", truth: lensesTruth(F, true, P, true),
			final: verdict(P, P), agree: matrix.Agree{Outcome: false, Policy: true}, knowable: true},
		{name: "unknowable truth: UNKNOWN agrees", truth: lensesTruth(P, false, P, true),
			final: verdict(U, P), agree: matrix.Agree{Outcome: true, Policy: true}},
		{name: "unknowable truth: the truth itself does not agree", truth: lensesTruth(P, false, F, false),
			final: verdict(P, F), agree: matrix.Agree{Outcome: false, Policy: false}},
		{name: "UNKNOWN where the truth is knowable disagrees", truth: lensesTruth(P, true, P, true),
			final: verdict(P, U), agree: matrix.Agree{Outcome: true, Policy: false}, knowable: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first := verdict(P, P)
			r := BuildRow(sc, tc.truth, []commitlayer.Subject{"account:acc_9", "account:acc_8", "account:acc_9"}, first, tc.final, 3,
				nil, "success", 4, 12.5, []string{"agent x"})
			require.Equal(t, tc.agree, r.Agree)
			require.Equal(t, tc.knowable, r.Truth.Knowable)
			require.Equal(t, tc.duplicate, r.Truth.Duplicate)
			if tc.reasonsLike == nil {
				tc.reasonsLike = []string{}
			}
			require.Equal(t, tc.reasonsLike, r.Truth.Reasons)
			require.Equal(t, "payout/returned_after_settlement", r.ID)
			require.Equal(t, "reversal", r.Family)
			require.True(t, r.AfterSettlement)
			require.Equal(t, P, r.Verdict.ProvisionalStatus)
			require.Equal(t, tc.final.Status, r.Verdict.Status)
			require.Equal(t, 3, r.Verdict.Versions)
			require.Equal(t, []commitlayer.Subject{"account:acc_8", "account:acc_9"}, r.Stray, "sorted, each once")
			require.Equal(t, []commitlayer.Subject{}, r.Orphans, "never null in JSON")
			require.NotNil(t, r.Verdict.Findings)
			require.Equal(t, 4, r.AgentCalls)
			require.Equal(t, "success", r.Claim)
			require.Equal(t, 12500*time.Microsecond, r.Latency())
		})
	}
}

// row builds a row as BuildRow would for the summary tests.
type rowSpec struct {
	id                    string
	family                string
	truthO, truthP        commitlayer.Status
	knowO, knowP          bool
	first, finalO, finalP commitlayer.Status
	codes                 []commitlayer.Code
	claim                 string
	duplicate             bool
	after                 bool
	stray, orphans        []commitlayer.Subject
	latency               float64
	err                   string
}

func (s rowSpec) row() matrix.Row {
	if s.err != "" {
		return matrix.Row{ID: s.id, Process: strings.Split(s.id, "/")[0], Family: s.family, Error: s.err}
	}
	truth := lensesTruth(s.truthO, s.knowO, s.truthP, s.knowP)
	if s.duplicate {
		truth.Reasons, truth.Duplicate = []string{"outcome x x: twice"}, true
	}
	sc := catalogue.Scenario{ID: s.id, Process: strings.Split(s.id, "/")[0], Injection: strings.Split(s.id, "/")[1], Family: s.family}
	if s.after {
		sc.AfterSettlement = func(context.Context, *catalogue.Env) error { return nil }
	}
	first := verdict(s.first, s.first)
	return BuildRow(sc, truth, s.stray, first, verdict(s.finalO, s.finalP, s.codes...), 1, s.orphans, s.claim, 3, s.latency, nil)
}

func TestSummarize(t *testing.T) {
	specs := []rowSpec{
		// 1: clean pass.
		{id: "refund/baseline", family: "baseline", truthO: P, truthP: P, knowO: true, knowP: true, first: P, finalO: P, finalP: P, claim: "success", latency: 10},
		// 2: duplicate caught; the agent claimed success.
		{id: "refund/dup", family: "transport", truthO: F, truthP: P, knowO: true, knowP: true, first: F, finalO: F, finalP: P,
			codes: []commitlayer.Code{commitlayer.CodeDuplicateEffect}, claim: "success", duplicate: true, latency: 30},
		// 3: a false negative (verdict PASS, truth FAIL) on a false claim.
		{id: "cancel/phantom", family: "system_error", truthO: F, truthP: P, knowO: true, knowP: true, first: P, finalO: P, finalP: P, claim: "success", latency: 20},
		// 4: a false positive on policy; the agent honestly failed.
		{id: "cancel/stop", family: "system_error", truthO: F, truthP: P, knowO: true, knowP: true, first: F, finalO: F, finalP: F,
			codes: []commitlayer.Code{commitlayer.CodeMissingEffect}, claim: "failure", latency: 20},
		// 5: unknowable, reported UNKNOWN.
		{id: "payout/down", family: "verifier", truthO: P, truthP: P, knowO: false, knowP: true, first: U, finalO: U, finalP: P, claim: "success", latency: 5},
		// 6: unknowable, not reported UNKNOWN.
		{id: "deploy/down", family: "verifier", truthO: P, truthP: P, knowO: false, knowP: false, first: U, finalO: U, finalP: P, claim: "success", latency: 5},
		// 7: stale read corrected.
		{id: "close/stale", family: "verifier", truthO: P, truthP: P, knowO: true, knowP: true, first: F, finalO: P, finalP: P, claim: "success", latency: 15},
		// 8: reversal after settlement caught (its first→final change is not a "correction").
		{id: "trade/busted", family: "reversal", truthO: F, truthP: P, knowO: true, knowP: true, first: P, finalO: F, finalP: P,
			codes: []commitlayer.Code{commitlayer.CodeEffectReversed}, claim: "success", after: true, latency: 40},
		// 9: wrong subject: one stray flagged, one missed, one false alarm.
		{id: "trade/wrong", family: "wrong_subject", truthO: F, truthP: P, knowO: true, knowP: true, first: F, finalO: F, finalP: P,
			codes: []commitlayer.Code{commitlayer.CodeMissingEffect}, claim: "success",
			stray: []commitlayer.Subject{"product:p_a", "product:p_b"}, orphans: []commitlayer.Subject{"product:p_a", "product:p_c"}, latency: 25},
		// 10: an error row.
		{id: "refund/broken", family: "transport", err: "enterprise did not start"},
		// 11: a policy failure the verdict called UNKNOWN (knowable): not detected.
		{id: "payout/limit", family: "limits", truthO: P, truthP: F, knowO: true, knowP: true, first: P, finalO: P, finalP: U, claim: "success", latency: 50},
	}
	var rows []matrix.Row
	for _, s := range specs {
		rows = append(rows, s.row())
	}
	s := Summarize(rows)
	require.Equal(t, 11, s.Scenarios)
	// Agreement: rows 3 (outcome), 4 (policy), 6 (policy), 10 (both), 11 (policy) disagree.
	require.Equal(t, matrix.Count{N: 9, Of: 11}, s.AgreeOutcome)
	require.Equal(t, matrix.Count{N: 7, Of: 11}, s.AgreePolicy)
	require.Equal(t, matrix.Count{N: 6, Of: 11}, s.AgreeBoth)
	require.Equal(t, []string{"cancel/phantom", "cancel/stop", "deploy/down", "refund/broken", "payout/limit"}, s.Disagreements)
	// Knowable failures: rows 2, 3, 4, 8, 9, 11; detected: 2, 4, 8, 9.
	require.Equal(t, matrix.Count{N: 4, Of: 6}, s.TrueFailures)
	// Rows with a failing lens: 2, 3, 4, 8, 9, 11; a PASS on one: row 3.
	require.Equal(t, matrix.Count{N: 1, Of: 6}, s.FalseNegatives)
	// Rows with a passing lens: all ten that ran; a FAIL on one: row 4 (policy).
	require.Equal(t, matrix.Count{N: 1, Of: 10}, s.FalsePositives)
	// True passes (both lenses PASS, knowable): rows 1, 7.
	require.Equal(t, 2, s.TruePasses)
	require.Equal(t, matrix.Count{N: 1, Of: 2}, s.UnknownWhenUnknowable)
	// Claimed success with a knowable outcome FAIL: rows 2, 3, 8, 9; caught: 2, 8, 9.
	require.Equal(t, matrix.Count{N: 3, Of: 4}, s.FalseClaimsCaught)
	require.Equal(t, matrix.Count{N: 1, Of: 1}, s.DuplicatesDetected)
	// The first status differs from the final one without an
	// after-settlement injection: rows 7 (PASS, agrees) and 11 (PASS →
	// UNKNOWN, disagrees); row 8's change is the reversal's.
	require.Equal(t, matrix.Count{N: 1, Of: 2}, s.CorrectedAtRecheck)
	require.Equal(t, matrix.Count{N: 1, Of: 1}, s.ReversalsCaught)
	require.Equal(t, matrix.Count{N: 1, Of: 2}, s.OrphansFlagged)
	require.Equal(t, 1, s.OrphanFalseAlarms)
	require.Equal(t, 1, s.Errors)
	require.InDelta(t, (10+30+20+20+5+5+15+40+25+50)/10.0, s.LatencyMeanMS, 1e-9, "errors are left out of the latency")
	require.Equal(t, 50.0, s.LatencyMaxMS)
	require.Equal(t, 50.0, s.LatencyP99MS, "nearest rank: the 99th of 10 is the largest")
	require.Zero(t, s.PassLatencyMeanMS, "no row measured its pass")
	require.Equal(t, []matrix.Group{{Name: "refund", Agree: matrix.Count{N: 2, Of: 3}}, {Name: "cancel", Agree: matrix.Count{N: 0, Of: 2}}, {Name: "close", Agree: matrix.Count{N: 1, Of: 1}}, {Name: "payout", Agree: matrix.Count{N: 1, Of: 2}},
		{Name: "deploy", Agree: matrix.Count{N: 0, Of: 1}}, {Name: "trade", Agree: matrix.Count{N: 2, Of: 2}}}, s.ByProcess, "in business registry order")
	var fams []string
	for _, g := range s.ByFamily {
		fams = append(fams, g.Name)
	}
	require.Equal(t, []string{"baseline", "transport", "system_error", "verifier", "limits", "reversal", "wrong_subject"}, fams,
		"in catalogue.Families order")
	odd := Summarize([]matrix.Row{{ID: "x/y", Process: "zeta", Family: "new"}, {ID: "refund/baseline", Process: "refund", Family: "baseline"}})
	require.Equal(t, "zeta", odd.ByProcess[1].Name, "unknown names come last")
	require.Equal(t, "new", odd.ByFamily[1].Name)

	empty := Summarize(nil)
	require.Equal(t, matrix.Summary{Disagreements: []string{}, ByProcess: []matrix.Group{}, ByFamily: []matrix.Group{}}, empty)

	// An error row alone is one disagreement and nothing else.
	only := Summarize([]matrix.Row{specs[9].row()})
	require.Equal(t, matrix.Count{N: 0, Of: 1}, only.AgreeBoth)
	require.Equal(t, 1, only.Errors)
	require.Zero(t, only.TrueFailures.Of)
	require.Zero(t, only.LatencyMeanMS)
}

func sampleResults(t *testing.T) matrix.Results {
	rows := []matrix.Row{
		rowSpec{id: "refund/baseline", family: "baseline", truthO: P, truthP: P, knowO: true, knowP: true, first: P, finalO: P, finalP: P, claim: "success", latency: 10.4}.row(),
		rowSpec{id: "payout/unreachable_verifier", family: "verifier", truthO: P, truthP: P, knowO: false, knowP: false, first: U, finalO: U, finalP: U,
			codes: []commitlayer.Code{commitlayer.CodeSourceUnavailable}, claim: "success", latency: 7}.row(),
		rowSpec{id: "trade/wrong_product", family: "wrong_subject", truthO: F, truthP: P, knowO: true, knowP: true, first: F, finalO: F, finalP: P,
			codes: []commitlayer.Code{commitlayer.CodeMissingEffect, commitlayer.CodeMissingEffect}, claim: "success",
			stray: []commitlayer.Subject{"product:p_globex"}, orphans: []commitlayer.Subject{"product:p_globex"}, latency: 30}.row(),
		rowSpec{id: "close/baseline", family: "baseline", err: "start | enterprise: disk full"}.row(),
	}
	rows[0].Summary = "a summary with a | pipe"
	rows[0].PassLatencyMS, rows[1].PassLatencyMS = 2.5, 4.5
	started := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	return NewResults("abc1234", started, started.Add(95*time.Second), 4, rows)
}

func TestResultsJSONShape(t *testing.T) {
	res := sampleResults(t)
	require.Equal(t, 95.0, res.WallSeconds)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"commit", "started_at", "finished_at", "wall_seconds", "concurrency", "summary", "scenarios"} {
		require.Contains(t, m, k)
	}
	require.Equal(t, "abc1234", m["commit"])
	require.Equal(t, "2026-11-29T12:00:00Z", m["started_at"])
	sc := m["scenarios"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "workflow", "injection", "truth", "verdict", "agree", "latency_ms"} {
		require.Contains(t, sc, k)
	}
	for _, k := range []string{"outcome", "policy", "knowable"} {
		require.Contains(t, sc["truth"], k)
	}
	for _, k := range []string{"status", "provisional_status", "lenses", "findings"} {
		require.Contains(t, sc["verdict"], k)
	}
	require.Equal(t, map[string]any{"outcome": true, "policy": true}, sc["agree"])
	sum := m["summary"].(map[string]any)
	require.Equal(t, map[string]any{"n": 3.0, "of": 4.0}, sum["agree_both"])

	var back matrix.Results
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, res.Summary, back.Summary)
	require.Equal(t, res.Scenarios[2].Stray, back.Scenarios[2].Stray)

	// Rows come out in catalogue order, unknown ids last.
	shuffled := []matrix.Row{{ID: "zz/unknown"}, {ID: "trade/baseline"}, {ID: "refund/stale_read"}, {ID: "refund/baseline"}}
	var got []string
	for _, r := range NewResults("", res.StartedAt, time.Time{}, 1, shuffled).Scenarios {
		got = append(got, r.ID)
	}
	require.Equal(t, []string{"refund/baseline", "refund/stale_read", "trade/baseline", "zz/unknown"}, got)
	require.Equal(t, "zz/unknown", shuffled[0].ID, "the caller's slice is left alone")

	// A run still going has no finish.
	running := NewResults("", res.StartedAt, time.Time{}, 2, nil)
	require.Zero(t, running.WallSeconds)
	require.True(t, running.FinishedAt.IsZero())
	require.Equal(t, []matrix.Row{}, running.Scenarios)
}

func TestMarkdown(t *testing.T) {
	md := Markdown(sampleResults(t))
	for _, want := range []string{
		"# Failure matrix results",
		"Commit `abc1234` · started 2026-11-29T12:00:00Z · 4 scenarios in 95.0 s · concurrency 4",
		"Scenarios: 4 · outcome-lens agreement with the oracle: 3/4 · policy-lens agreement: 3/4 · both: 3/4",
		"| Metric | Value |",
		"| True failures detected | 1/1 |",
		"| False negatives (verifier PASS, truth FAIL) | 0 of 1 with a failing lens |",
		"| UNKNOWN reported when the truth is unknowable (required system down) | 1/1 |",
		"| Effects on a subject with no recorded action | 1/1 flagged, 0 false alarms |",
		"| End-to-end verify latency (action recorded → final verdict), mean / p99 / max | 16 ms / 30 ms / 30 ms |",
		"| Pass latency in the worker (pull, read facts, evaluate, store), mean / p99 / max | 3.5 ms / 4.5 ms / 4.5 ms |",
		"| Errors | 1 |",
		"Disagreements: close/baseline",
		"| workflow refund | 1/1 |",
		"| family baseline | 1/2 |",
		"| refund/baseline | baseline | PASS/PASS | PASS → PASS | PASS/PASS | yes |  | 10 ms |",
		"| payout/unreachable_verifier | verifier | PASS?/PASS? | UNKNOWN → UNKNOWN | UNKNOWN/UNKNOWN | yes | source_unavailable x | 7 ms |",
		"| trade/wrong_product | wrong_subject | FAIL/PASS | FAIL → FAIL | FAIL/PASS | yes | missing_effect x | 30 ms |",
		`| close/baseline | baseline | | | | **no** | error: start \| enterprise: disk full | |`,
	} {
		require.Contains(t, md, want)
	}
	// Every table row has the same number of cells as its header.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| id |") {
			require.Equal(t, 9, strings.Count(line, "|"))
		}
		if strings.HasPrefix(line, "| trade/") || strings.HasPrefix(line, "| close/") {
			require.Equal(t, 9, strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"), line)
		}
	}

	disagree := sampleResults(t)
	disagree.Scenarios[0].Agree.Policy = false
	require.Contains(t, Markdown(disagree), "| **no** (policy) |")
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sandbox", "results")
	res := sampleResults(t)
	require.NoError(t, WriteFiles(dir, res))
	js, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	require.NoError(t, err)
	var back matrix.Results
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, res.Commit, back.Commit)
	require.Len(t, back.Scenarios, 4)
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	require.NoError(t, err)
	require.Equal(t, Markdown(res), string(md))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3, "json, markdown and the HTML report; no temporary files left")
	page, err := os.ReadFile(filepath.Join(dir, "latest.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), "<html")
	require.Contains(t, string(page), res.Commit)

	// Overwrites.
	res.Commit = "def5678"
	require.NoError(t, WriteFiles(dir, res))
	js, err = os.ReadFile(filepath.Join(dir, "latest.json"))
	require.NoError(t, err)
	require.Contains(t, string(js), "def5678")

	// A directory that cannot be made is an error naming the operation.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	err = WriteFiles(filepath.Join(file, "results"), res)
	require.ErrorContains(t, err, "write results")
	var pe *os.PathError
	require.True(t, errors.As(err, &pe))
}

func TestLatencyStats(t *testing.T) {
	mean, p99, maxV := latencyStats(nil)
	require.Zero(t, mean+p99+maxV)
	var ms []float64
	for i := 200; i >= 1; i-- { // out of order on purpose
		ms = append(ms, float64(i))
	}
	mean, p99, maxV = latencyStats(ms)
	require.InDelta(t, 100.5, mean, 1e-9)
	require.Equal(t, 198.0, p99, "nearest rank: ceil(0.99*200) = 198th")
	require.Equal(t, 200.0, maxV)
	require.Equal(t, float64(200), ms[0], "the input is not reordered")
}
