package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
	"github.com/commitlayer/commitlayer/sandbox/sinks/sinkstest"
)

// TestSinksFlag: -sinks builds the sinks up front (a missing key refuses
// the run before it starts), and the end of a run logs every row to them
// as one experiment, printing what arrived; the key is never printed.
func TestSinksFlag(t *testing.T) {
	var stderr bytes.Buffer
	t.Setenv(sinks.EnvBraintrustKey, "")
	_, err := parseSandboxFlags("sandbox", []string{"-sinks", "braintrust"}, &stderr)
	require.ErrorContains(t, err, sinks.EnvBraintrustKey)
	_, err = parseSandboxFlags("sandbox", []string{"-sinks", "nowhere"}, &stderr)
	require.Error(t, err)

	const key = "bt-test-key-sinksflag-0001"
	fake := sinkstest.NewBraintrust(key)
	defer fake.Close()
	t.Setenv(sinks.EnvBraintrustKey, key)
	t.Setenv(sinks.EnvBraintrustURL, fake.URL)
	o, err := parseSandboxFlags("sandbox", []string{"-sinks", "braintrust", "-only", "refund/baseline"}, &stderr)
	require.NoError(t, err)
	require.Len(t, o.sinks, 1)

	row := matrix.Row{ID: "refund/baseline", Process: "refund", Injection: "baseline", Family: "baseline",
		Truth:   matrix.Truth{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass, Knowable: true, OutcomeKnowable: true, PolicyKnowable: true},
		Verdict: matrix.Verdict{Status: commitlayer.StatusPass, Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}},
		Agree:   matrix.Agree{Outcome: true, Policy: true},
		Judges:  []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "ok"}}}
	results := report.NewResults("abc", time.Unix(0, 0), time.Unix(5, 0), 1, []matrix.Row{row})
	var out bytes.Buffer
	deliverToSinks(context.Background(), o.sinks, "run-1", results, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Contains(t, out.String(), "braintrust: 1/1 rows")
	require.Contains(t, out.String(), "all arrived")
	require.NotContains(t, out.String(), key)
	exps := fake.Experiments()
	require.Len(t, exps, 1)
	require.Len(t, exps[0].Events, 1)
}
