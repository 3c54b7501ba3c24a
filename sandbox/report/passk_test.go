package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/stretchr/testify/require"
)

var testTime = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

// attemptRow is one attempt of a scenario: truth is the outcome truth,
// verdict CommitLayer's outcome lens (policy PASS on both).
func attemptRow(id, wf string, attempt int, truth, verdict commitlayer.Status) matrix.Row {
	return matrix.Row{ID: id, Process: wf, Attempt: attempt,
		Truth:   matrix.Truth{Outcome: truth, Policy: commitlayer.StatusPass, OutcomeKnowable: true, PolicyKnowable: true, Knowable: true},
		Verdict: matrix.Verdict{Status: verdict, Lenses: commitlayer.Lenses{Outcome: verdict, Policy: commitlayer.StatusPass}},
		Agree:   matrix.Agree{Outcome: truth == verdict, Policy: true}}
}

func TestPassK(t *testing.T) {
	pass, fail := commitlayer.StatusPass, commitlayer.StatusFail
	rows := []matrix.Row{
		// Succeeds every time, and CommitLayer says so every time.
		attemptRow("refund/a", "refund", 1, pass, pass), attemptRow("refund/a", "refund", 2, pass, pass), attemptRow("refund/a", "refund", 3, pass, pass),
		// Succeeds twice of three: not pass^3; CommitLayer right each time.
		attemptRow("refund/b", "refund", 1, pass, pass), attemptRow("refund/b", "refund", 2, fail, fail), attemptRow("refund/b", "refund", 3, pass, pass),
		// Always fails; CommitLayer misses it once: not consistent.
		attemptRow("payout/c", "payout", 1, fail, fail), attemptRow("payout/c", "payout", 2, fail, pass), attemptRow("payout/c", "payout", 3, fail, fail),
	}
	ps := PassKOf(rows)
	require.Equal(t, []matrix.PassK{
		{Process: "refund", K: 3, Agent: matrix.Count{N: 1, Of: 2}, CommitLayer: matrix.Count{N: 1, Of: 2}},
		{Process: "payout", K: 3, Agent: matrix.Count{N: 0, Of: 1}, CommitLayer: matrix.Count{N: 0, Of: 1}},
		{Process: PassKAll, K: 3, Agent: matrix.Count{N: 1, Of: 3}, CommitLayer: matrix.Count{N: 1, Of: 3}},
	}, ps)

	// refund/b's consistency fails on the verdict changing even though
	// each agrees: CommitLayer's consistency is about the same verdict.
	require.Equal(t, 1, ps[0].CommitLayer.N)

	// A scenario with fewer attempts (one errored out before its row)
	// sets k; an error row is no success.
	short := append(rows[:0:0], rows[:8]...)
	ps = PassKOf(short)
	require.Equal(t, 2, ps[0].K)
	withErr := append(rows[:0:0], rows...)
	withErr[0].Error = "enterprise lost"
	require.Equal(t, 0, PassKOf(withErr)[0].Agent.N)

	// Not repeated: no pass^k, and the summary and markdown say nothing.
	require.Nil(t, PassKOf([]matrix.Row{attemptRow("refund/a", "refund", 0, pass, pass)}))

	res := NewResults("c", testTime, testTime, 4, rows)
	require.Equal(t, 3, res.Repeat)
	require.Len(t, res.Summary.PassK, 3)
	md := Markdown(res)
	require.Contains(t, md, "## pass^3")
	require.Contains(t, md, "| **all** | 1/3 (33%) | 1/3 (33%) |")
	require.Contains(t, md, "| refund/b #2 |", "the scenario table names each attempt")
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	decoded, err := matrix.Decode(raw)
	require.NoError(t, err)
	require.Len(t, decoded.Summary.PassK, 3, "a results file keeps its pass_k")
}

func TestReplaySummary(t *testing.T) {
	pass, fail := commitlayer.StatusPass, commitlayer.StatusFail
	same := attemptRow("refund/a", "refund", 0, pass, pass)
	same.Replay = &matrix.RowReplay{Of: "r1", Calls: 3, Recorded: matrix.VerdictBrief{Status: pass, Lenses: same.Verdict.Lenses}, Agreed: true}
	changed := attemptRow("refund/b", "refund", 0, fail, fail)
	changed.Replay = &matrix.RowReplay{Of: "r1", Calls: 4, Divergent: 1, Diffs: []string{"call 2 POST /payments/refunds: recorded status 200, replayed 500"},
		Recorded: matrix.VerdictBrief{Status: pass, Lenses: commitlayer.Lenses{Outcome: pass, Policy: pass}}}
	require.True(t, same.SameVerdict())
	require.False(t, changed.SameVerdict())
	s := SummarizeReplay([]matrix.Row{same, changed})
	require.Equal(t, &matrix.ReplaySummary{Of: "r1", Rows: 2, Calls: 7, DivergentCalls: 1, FaithfulRows: 1, SameVerdict: 1,
		Changed: []string{"refund/b"}, AgreedBefore: 1, AgreeNow: 2}, s)
	require.Nil(t, SummarizeReplay([]matrix.Row{attemptRow("x", "refund", 0, pass, pass)}))

	res := NewResults("c", testTime, testTime, 4, []matrix.Row{same, changed})
	require.Equal(t, "r1", res.ReplayOf)
	require.Equal(t, "replay", FileBase(res), "a replay never overwrites latest.*")
	md := Markdown(res)
	require.Contains(t, md, "## Replay of run r1")
	require.Contains(t, md, "| Calls answering differently from the recording | 1 |")
	require.Contains(t, md, "| refund/b | PASS PASS/PASS | FAIL FAIL/PASS | 1 call 2 POST /payments/refunds: recorded status 200, replayed 500 |")
}

// The HTML report shows how a replay went and pass^k's chart.
func TestReportShowsReplayAndPassK(t *testing.T) {
	pass := commitlayer.StatusPass
	row := attemptRow("refund/a", "refund", 0, pass, pass)
	row.Replay = &matrix.RowReplay{Of: "r1", Calls: 3, Recorded: matrix.VerdictBrief{Status: pass, Lenses: row.Verdict.Lenses}, Agreed: true}
	page, err := HTML(NewResults("c", testTime, testTime, 4, []matrix.Row{row}), Options{})
	require.NoError(t, err)
	require.Contains(t, string(page), "3, 0 answered differently from the recording; 1/1 rows faithful, 1/1 verdicts as recorded")

	rows := []matrix.Row{attemptRow("refund/a", "refund", 1, pass, pass), attemptRow("refund/a", "refund", 2, pass, pass)}
	page, err = HTML(NewResults("c", testTime, testTime, 4, rows), Options{})
	require.NoError(t, err)
	require.Contains(t, string(page), "pass^2 per workflow")
	require.Contains(t, string(page), "k = 2")
}

// TestMarkdownOpensWithTheJudgeTable: latest.md's headline is the
// judge-versus-CommitLayer table, with the judge's misses by family.
func TestMarkdownOpensWithTheJudgeTable(t *testing.T) {
	missed := matrix.Row{ID: "refund/phantom_success", Process: "refund", Injection: "phantom_success", Family: "agent",
		Truth:   matrix.Truth{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass, Knowable: true, OutcomeKnowable: true, PolicyKnowable: true},
		Verdict: matrix.Verdict{Status: commitlayer.StatusFail, Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass}},
		Agree:   matrix.Agree{Outcome: true, Policy: true},
		Judges:  []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "believed the 200"}}}
	res := NewResults("abc", time.Unix(0, 0), time.Unix(10, 0), 1, []matrix.Row{missed})
	md := Markdown(res)
	i := strings.Index(md, "## Trace-only judges versus CommitLayer")
	j := strings.Index(md, "Commit `abc`")
	require.True(t, i > 0 && j > i, "the judge table comes first:\n%s", md)
	require.Contains(t, md, "refund/phantom_success")
}

func lookup(t *testing.T, id string) catalogue.Scenario {
	t.Helper()
	sc, ok := catalogue.Lookup(id)
	require.True(t, ok, id)
	return sc
}
