package bench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// TestReportsRenderAStoredRun: the API's report route renders a run from
// its stored summary and rows, with links to the Temporal UI.
func TestReportsRenderAStoredRun(t *testing.T) {
	row := matrix.Row{ID: "refund/baseline", Process: "refund", Injection: "baseline", Family: "baseline",
		Truth:   matrix.Truth{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass, Knowable: true, OutcomeKnowable: true, PolicyKnowable: true},
		Verdict: matrix.Verdict{Status: commitlayer.StatusPass, Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}},
		Agree:   matrix.Agree{Outcome: true, Policy: true},
		Judges:  []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "believed <b>it</b>"}}}
	res := report.NewResults("", time.Unix(0, 0), time.Unix(9, 0), 1, []matrix.Row{row})
	summary, err := json.Marshal(res.Summary)
	require.NoError(t, err)
	rows, err := json.Marshal(res.Scenarios)
	require.NoError(t, err)
	page, err := Reports{TemporalUI: "http://ui.example:8233", Namespace: "prod"}.Render(benchstore.Run{
		ID: "run-7", Status: "done", Summary: summary, Results: rows, StartedAt: time.Unix(0, 0), FinishedAt: time.Unix(9, 0)})
	require.NoError(t, err)
	html := string(page)
	require.True(t, strings.HasPrefix(strings.TrimSpace(html), "<!DOCTYPE html>") || strings.Contains(html, "<html"), html[:80])
	require.Contains(t, html, "refund/baseline")
	require.Contains(t, html, "http://ui.example:8233/namespaces/prod/workflows/")
	require.NotContains(t, html, "<b>it</b>", "row text is escaped")

	_, err = Reports{}.Render(benchstore.Run{ID: "bad", Results: json.RawMessage(`{"not":"rows"}`)})
	require.Error(t, err)
}
