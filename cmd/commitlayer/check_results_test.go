package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/check"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/recheck"
)

// checkResultsScenarios cover a pass, a duplicate, an unreachable source,
// an unreachable source beside a policy violation, a re-check after
// settlement and a limit counted over earlier actions.
var checkResultsScenarios = []string{
	"refund/baseline",
	"refund/lost_response_retry_no_key",
	"refund/unreachable_verifier",
	"refund/over_limit_orders_unreachable",
	"refund/reversed_after_settlement",
	"payout/daily_total_exceeded",
}

// TestCheckResultsReproducesTheMatrix runs a subset of the failure matrix
// through `commitlayer sandbox` (the dev server, PostgreSQL, the real
// verification workflows) with -purge, which writes latest.check.ndjson.gz
// beside latest.json before the tenants go; `commitlayer check --results`
// then verifies every scenario again with no server and reproduces each
// verdict the service recorded — status, lenses, every finding with its
// message, facts and hint — and the rows of latest.json.
func TestCheckResultsReproducesTheMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs matrix scenarios")
	}
	out := t.TempDir()
	for k, v := range map[string]string{
		"DATABASE_URL":            testenv.Postgres(t),
		"TEMPORAL_ADDRESS":        testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE":      testenv.Namespace(),
		"COMMITLAYER_ADDR":        "127.0.0.1:0",
		"COMMITLAYER_TASK_QUEUE":  "commitlayer-test-" + randHex(6),
		"COMMITLAYER_SANDBOX_DIR": t.TempDir(),
	} {
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := LoadConfig(os.Getenv)
	require.NoError(t, err)
	code := sandboxCmd(context.Background(), cfg, logger, "sandbox", []string{"-only", strings.Join(checkResultsScenarios, ","),
		"-concurrency", "3", "-out", out, "-purge"}, &stdout, &stderr)
	require.Equal(t, 0, code, "sandbox: %s\n%s", stdout.String(), stderr.String())
	bundlePath := filepath.Join(out, "latest"+recheck.BundleSuffix)
	require.Contains(t, stdout.String(), "check bundle: "+bundlePath+", 6 scenarios")
	require.Contains(t, stdout.String(), "purged the run's")

	raw, err := os.ReadFile(filepath.Join(out, "latest.json"))
	require.NoError(t, err)
	var results matrix.Results
	require.NoError(t, json.Unmarshal(raw, &results))
	require.Len(t, results.Scenarios, len(checkResultsScenarios))

	bundle, err := recheck.ReadBundleFile(bundlePath)
	require.NoError(t, err)
	require.Len(t, bundle.Entries, len(checkResultsScenarios))
	unreachable, priors := 0, 0
	for _, e := range bundle.Entries {
		unreachable += len(e.Value.Unreachable)
		priors += len(e.Value.Actions) - 1
	}
	require.Positive(t, unreachable, "the subset has scenarios with unreachable sources")
	require.Positive(t, priors, "the subset has a scenario with earlier actions")

	junit := filepath.Join(t.TempDir(), "check.xml")
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"check", "--results", filepath.Join(out, "latest.json"), "--junit", junit}, &stdout, &stderr)
	text := stdout.String()
	t.Log(text)
	require.Empty(t, stderr.String())
	require.Contains(t, text, "6 of 6 recorded verdicts reproduced, 0 mismatches", text)
	require.NotContains(t, text, "MISMATCH")
	require.Equal(t, check.ExitFail, code, "the subset has FAIL verdicts: %s", text)

	// The re-verified verdicts are the rows' too.
	res, err := recheck.VerifyBundle(bundle)
	require.NoError(t, err)
	byID := map[string]check.Result{}
	for _, r := range res {
		require.Empty(t, r.Mismatch, r.Name)
		byID[r.Name] = r
	}
	for _, row := range results.Scenarios {
		r, ok := byID[row.ID]
		require.True(t, ok, "no bundle entry for %s", row.ID)
		require.Equal(t, row.Verdict.Status, r.Verdict.Status, row.ID)
		require.Equal(t, row.Verdict.Lenses, r.Verdict.Lenses, row.ID)
		require.Equal(t, row.Verdict.ClaimContradicted, r.Verdict.ClaimContradicted, row.ID)
		require.Equal(t, findingKeys(row.Verdict.Findings), findingKeys(r.Verdict.Findings), row.ID)
		require.Contains(t, text, row.ID+": ", "the text names the scenario")
	}

	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Type string `xml:"type,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	require.NoError(t, xml.Unmarshal(b, &doc))
	require.Equal(t, len(checkResultsScenarios), doc.Tests)
	for _, c := range doc.Suites[0].Cases {
		if c.Failure != nil {
			require.NotEqual(t, "MISMATCH", c.Failure.Type, c.Name)
		}
	}

	// The bundle's path works as well as the results file's.
	stdout.Reset()
	require.Equal(t, check.ExitFail, run(context.Background(), []string{"check", "--results", bundlePath}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "6 of 6 recorded verdicts reproduced, 0 mismatches")
}

func findingKeys(fs []commitlayer.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Code)+" "+f.Check+" "+string(f.Lens)+" "+f.Message)
	}
	return out
}
