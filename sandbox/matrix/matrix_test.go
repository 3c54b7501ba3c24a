package matrix

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// A results file as written (wire names "workflow", "workflow_id")
// decodes into Results as it is.
func TestDecodeResults(t *testing.T) {
	data := []byte(`{"id":"run-9","commit":"abc","started_at":"2026-11-29T12:48:53.77Z","concurrency":4,
	 "summary":{"scenarios":1,"agree_both":{"n":1,"of":1}},
	 "scenarios":[{"id":"refund/phantom_success","workflow":"refund","injection":"phantom_success","family":"system_error",
	  "truth":{"outcome":"FAIL","policy":"PASS","knowable":true,"outcome_knowable":true,"reasons":["x"]},
	  "verdict":{"status":"FAIL","provisional_status":"FAIL","lenses":{"outcome":"FAIL","policy":"PASS"},
	   "findings":[{"code":"missing_effect","check":"refund","lens":"outcome","message":"no refund"}],"versions":2},
	  "agree":{"outcome":true,"policy":true},"claim":"success","latency_ms":207.5,
	  "judges":[{"name":"rule","verdict":"PASS","reason":"200"}],"trajectory":{"instruction":"refund"},
	  "workflow_id":"bench/run-9/refund/phantom_success","run_id":"r-1"}]}`)
	run, err := Decode(data)
	require.NoError(t, err)
	rows := run.Scenarios
	require.Equal(t, "run-9", run.ID)
	require.Equal(t, time.Date(2026, 11, 29, 12, 48, 53, 770000000, time.UTC), run.StartedAt)
	require.Len(t, rows, 1)
	require.Equal(t, Row{ID: "refund/phantom_success", Process: "refund", Injection: "phantom_success", Family: "system_error",
		Truth: Truth{Outcome: "FAIL", Policy: "PASS", Knowable: true, OutcomeKnowable: true, Reasons: []string{"x"}},
		Verdict: Verdict{Status: "FAIL", ProvisionalStatus: "FAIL", Lenses: commitlayer.Lenses{Outcome: "FAIL", Policy: "PASS"},
			Findings: []commitlayer.Finding{{Code: "missing_effect", Check: "refund", Lens: "outcome", Message: "no refund"}}, Versions: 2},
		Agree: Agree{Outcome: true, Policy: true}, Claim: "success", Judges: []JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "200"}},
		Trajectory: &llm.Trajectory{Instruction: "refund"}, LatencyMS: 207.5,
		WorkflowID: "bench/run-9/refund/phantom_success", RunID: "r-1"}, rows[0])

	_, err = Decode([]byte(`{"scenarios":{}}`))
	require.ErrorContains(t, err, "decode results")
}

// The results files in sandbox/results decode into Results and encode back
// to the same JSON: the Go names changed (Process), the wire did not.
func TestResultsFilesRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../results/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var want any
		require.NoError(t, json.Unmarshal(raw, &want))
		res, err := Decode(raw)
		require.NoError(t, err, f)
		again, err := json.Marshal(res)
		require.NoError(t, err)
		var got any
		require.NoError(t, json.Unmarshal(again, &got))
		wm, gm := want.(map[string]any), got.(map[string]any)
		for k := range wm {
			if k == "llm" || k == "agent" || k == "skipped" || k == "not_run" {
				continue // a model-driven run's own summary (report.LLMResults)
			}
			require.Equal(t, wm[k], gm[k], "%s: %s", f, k)
		}
	}
}
