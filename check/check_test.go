package check

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

const payout = `id: send_payout
kind: action
subject: account
settlement: 10m
watch: 1h
sources: [ledger]
policy:
  - id: positive_amount
    rule: params.amount > 0
limits:
  - id: daily
    per: agent
    window: 24h
    effect: payout
    sum: effect.amount
    max: 1000
effects:
  - id: payout
    source: ledger
    type: payout_sent
    count: 1
    expect: effect.amount == params.amount
`

const note = `{"id":"note_anything","kind":"action","settlement":"1m","watch":"1m","sources":["tickets"],` +
	`"effects":[{"id":"note","source":"tickets","type":"note_added"}]}`

// files writes name → content into a temp dir and returns the paths.
func files(t *testing.T, m map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for name, content := range m {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		out[name] = p
	}
	return out
}

func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }

const (
	factP1   = `{"source":"ledger","type":"payout_sent","subject":"account:a_1","external_id":"l1","occurred_at":"2026-11-01T10:00:01Z","attrs":{"amount":500}}`
	factP2   = `{"source":"ledger","type":"payout_sent","subject":"account:a_2","external_id":"l2","occurred_at":"2026-11-01T11:00:01Z","attrs":{"amount":700}}`
	factNote = `{"source":"tickets","type":"note_added","subject":"ticket:t_1","external_id":"n1","occurred_at":"2026-11-01T10:00:01Z"}`
	actP1    = `{"id":"p1","contract":"send_payout","agent":"bot","subject":"account:a_1","requested_at":"2026-11-01T10:00:00Z","params":{"amount":500},"claim":{"status":"success"}}`
	actP2    = `{"id":"p2","contract":"send_payout","agent":"bot","subject":"account:a_2","requested_at":"2026-11-01T11:00:00Z","params":{"amount":700},"claim":{"status":"success"}}`
	actP3    = `{"id":"p3","contract":"send_payout","agent":"other","subject":"account:a_3","requested_at":"2026-11-01T11:00:00Z","params":{"amount":50}}`
	actNote  = `{"contract":"note_anything","agent":"bot","subject":"ticket:t_1","requested_at":"2026-11-01T10:00:00Z"}`
)

func TestMainExitCodes(t *testing.T) {
	tests := []struct {
		name      string
		facts     string
		actions   string
		extra     []string
		code      int
		stdout    []string
		stderr    string
		noContrib bool
	}{
		{"all pass", lines(factP1, factNote), lines(actP1, actNote), nil, ExitPass,
			[]string{"PASS    send_payout p1 on account:a_1", "PASS    note_anything line-2 on ticket:t_1", "2 actions: 2 PASS, 0 FAIL, 0 UNKNOWN"}, "", false},
		{"limit across actions fails", lines(factP1, factP2), lines(actP1, actP2), nil, ExitFail,
			[]string{"FAIL    send_payout p2", "limit_exceeded daily [policy]", "(next: compensate)"}, "", false},
		{"missing effect fails and contradicts the claim", lines(factP1), lines(actP1, actP2), nil, ExitFail,
			[]string{"missing_effect payout [outcome]", "(next: human_review)", `the agent's claim "success" is contradicted`}, "", false},
		{"silent source is unknown", lines(factP1), lines(actP1, actNote), nil, ExitUnknown,
			[]string{"UNKNOWN note_anything", "source_unavailable", "unavailable sources: tickets", "(next: retry_read)"}, "", false},
		{"declared source is connected", lines(factP1), lines(actP1, actNote), []string{"--connected", "tickets"}, ExitFail,
			[]string{"FAIL    note_anything", "missing_effect note"}, "", false},
		{"fail wins over unknown", lines(factP1), lines(actP1, actP3, actNote), nil, ExitFail, []string{"1 PASS, 1 FAIL, 1 UNKNOWN"}, "", false},
		{"before settlement with --at is provisional", lines(factP1), lines(actP1), []string{"--at", "2026-11-01T10:05:00Z"}, ExitPass,
			[]string{"(provisional)"}, "", false},
		{"duplicate fact counted once", lines(factP1, factP1), lines(actP1), nil, ExitPass, []string{"1 PASS"}, "", false},
		{"bad fact line", lines(factP1, `{"source":"ledger","type":"x","subject":"nocolon","external_id":"e","occurred_at":"2026-11-01T10:00:00Z"}`), lines(actP1), nil,
			ExitBadInput, nil, "facts.ndjson:2: subject: ", false},
		{"fact not JSON", lines("", factP1, "{oops"), lines(actP1), nil, ExitBadInput, nil, "facts.ndjson:3: not a JSON object", false},
		{"unknown fact field", lines(`{"source":"ledger","type":"x","subject":"a:1","external_id":"e","occurred_at":"2026-11-01T10:00:00Z","amount":3}`), lines(actP1), nil,
			ExitBadInput, nil, `facts.ndjson:1: not a JSON object of the expected shape: json: unknown field "amount"`, false},
		{"two values on a line", lines(factP1 + " {}"), lines(actP1), nil, ExitBadInput, nil, "facts.ndjson:1: more than one JSON value", false},
		{"action without requested_at", lines(factP1), lines(actP1, `{"contract":"send_payout","agent":"bot","subject":"account:a_1"}`), nil,
			ExitBadInput, nil, "actions.ndjson:2: requested_at: is required", false},
		{"action of an unknown contract", lines(factP1), lines(actP1, `{"contract":"nope","agent":"bot","subject":"account:a_1","requested_at":"2026-11-01T10:00:00Z"}`), nil,
			ExitBadInput, nil, `actions.ndjson:2: contract "nope" is not among the --contract files (given: [note_anything send_payout])`, false},
		{"subject of another type", lines(factP1), lines(`{"contract":"send_payout","agent":"bot","subject":"order:o_1","requested_at":"2026-11-01T10:00:00Z"}`), nil,
			ExitBadInput, nil, `actions.ndjson:1: subject: contract send_payout acts on "account" subjects, not "order"`, false},
		{"duplicate action id", lines(factP1), lines(actP1, "", actP1), nil, ExitBadInput, nil, `actions.ndjson:3: id "p1" is also the id of the action on line 1`, false},
		{"no actions", lines(factP1), "\n\n", nil, ExitBadInput, nil, "actions.ndjson: no actions to check", false},
		{"bad --at", lines(factP1), lines(actP1), []string{"--at", "yesterday"}, ExitBadInput, nil, `--at "yesterday" is not an RFC 3339 time`, false},
		{"no contract", lines(factP1), lines(actP1), nil, ExitBadInput, nil, "--contract is required", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := files(t, map[string]string{"payout.yaml": payout, "note.json": note, "facts.ndjson": tt.facts, "actions.ndjson": tt.actions})
			var args []string
			if !tt.noContrib {
				args = append(args, "--contract", p["payout.yaml"], "--contract", p["note.json"])
			}
			args = append(args, "--facts", p["facts.ndjson"], "--actions", p["actions.ndjson"])
			args = append(args, tt.extra...)
			var stdout, stderr bytes.Buffer
			code := Main(args, &stdout, &stderr)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			for _, s := range tt.stdout {
				require.Contains(t, stdout.String(), s)
			}
			if tt.stderr != "" {
				require.Contains(t, stderr.String(), tt.stderr)
				require.Empty(t, stdout.String())
			} else {
				require.Empty(t, stderr.String())
			}
		})
	}
}

func TestBadContractNamesItsLine(t *testing.T) {
	p := files(t, map[string]string{
		"bad.yaml": "id: broken\nkind: action\nsources: [ledger]\neffects:\n  - id: e\n    source: ledger\n    type: t\n    expect: effect.amount ==\n",
		"dup.yaml": payout, "facts.ndjson": lines(factP1), "actions.ndjson": lines(actP1),
	})
	var stderr bytes.Buffer
	code := Main([]string{"--contract", p["bad.yaml"], "--facts", p["facts.ndjson"], "--actions", p["actions.ndjson"]}, &bytes.Buffer{}, &stderr)
	require.Equal(t, ExitBadInput, code)
	require.Contains(t, stderr.String(), "bad.yaml: contract broken: settlement (line 1): is required")
	require.Contains(t, stderr.String(), "\ncontract broken: effects[0].expect (line 8): ")

	stderr.Reset()
	other := files(t, map[string]string{"again.yaml": payout})
	code = Main([]string{"--contract", p["dup.yaml"], "--contract", other["again.yaml"], "--facts", p["facts.ndjson"], "--actions", p["actions.ndjson"]}, &bytes.Buffer{}, &stderr)
	require.Equal(t, ExitBadInput, code)
	require.Contains(t, stderr.String(), "contract send_payout is also defined in "+p["dup.yaml"])

	stderr.Reset()
	code = Main([]string{"--contract", "/nonexistent/x.yaml", "--facts", p["facts.ndjson"], "--actions", p["actions.ndjson"]}, &bytes.Buffer{}, &stderr)
	require.Equal(t, ExitBadInput, code)
	require.Contains(t, stderr.String(), "/nonexistent/x.yaml")
}

// junit mirrors the JUnit XML shape CI systems read.
type junit struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Cases    []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Body    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnitShape(t *testing.T) {
	p := files(t, map[string]string{"payout.yaml": payout, "note.json": note,
		"facts.ndjson": lines(factP1, factP2), "actions.ndjson": lines(actP1, actP2, actNote)})
	out := filepath.Join(t.TempDir(), "out.xml")
	code := Main([]string{"--contract", p["payout.yaml"], "--contract", p["note.json"], "--facts", p["facts.ndjson"],
		"--actions", p["actions.ndjson"], "--junit", out}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Equal(t, ExitFail, code)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(raw, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)))
	var doc junit
	require.NoError(t, xml.Unmarshal(raw, &doc), "%s", raw)
	require.Equal(t, 3, doc.Tests)
	require.Equal(t, 1, doc.Failures)
	require.Equal(t, 1, doc.Errors)
	require.Len(t, doc.Suites, 1)
	s := doc.Suites[0]
	require.Equal(t, "commitlayer check", s.Name)
	require.Equal(t, 3, s.Tests)
	require.Len(t, s.Cases, 3)
	require.Equal(t, "p1 account:a_1", s.Cases[0].Name)
	require.Equal(t, "send_payout", s.Cases[0].Classname)
	require.Nil(t, s.Cases[0].Failure)
	require.Nil(t, s.Cases[0].Error)
	require.NotNil(t, s.Cases[1].Failure)
	require.Equal(t, "FAIL", s.Cases[1].Failure.Type)
	require.Contains(t, s.Cases[1].Failure.Message, "limit_exceeded daily")
	require.Contains(t, s.Cases[1].Failure.Body, "limit_exceeded daily [policy]: ")
	require.NotNil(t, s.Cases[2].Error)
	require.Equal(t, "UNKNOWN", s.Cases[2].Error.Type)
	require.Contains(t, s.Cases[2].Error.Body, "unavailable sources: tickets")

	// An unwritable path is reported.
	var stderr bytes.Buffer
	code = Main([]string{"--contract", p["payout.yaml"], "--facts", p["facts.ndjson"], "--actions", p["facts.ndjson"],
		"--junit", "/nonexistent/dir/out.xml"}, &bytes.Buffer{}, &stderr)
	require.Equal(t, ExitBadInput, code)
}

func TestExitCode(t *testing.T) {
	r := func(s ...commitlayer.Status) []Result {
		var out []Result
		for _, x := range s {
			out = append(out, Result{Verdict: commitlayer.Verdict{Status: x}})
		}
		return out
	}
	P, F, U := commitlayer.StatusPass, commitlayer.StatusFail, commitlayer.StatusUnknown
	require.Equal(t, ExitPass, ExitCode(r(P, P)))
	require.Equal(t, ExitFail, ExitCode(r(P, F)))
	require.Equal(t, ExitUnknown, ExitCode(r(U, P)))
	require.Equal(t, ExitFail, ExitCode(r(U, F, P)))
}

// sandboxArgs are the eight sandbox contracts and the sandbox-shaped run in
// testdata/sandbox.
func sandboxArgs(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "sandbox", "contracts", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, paths, 8)
	var args []string
	for _, p := range paths {
		args = append(args, "--contract", p)
	}
	return append(args, "--facts", filepath.Join("testdata", "sandbox", "facts.ndjson"),
		"--actions", filepath.Join("testdata", "sandbox", "actions.ndjson"))
}

// wantSandbox is each action's expected status and findings.
var wantSandbox = map[string]struct {
	status   commitlayer.Status
	findings []string
}{
	"refund-ok":        {commitlayer.StatusPass, nil},
	"refund-phantom":   {commitlayer.StatusFail, []string{"missing_effect refund", "missing_effect order_refunded", "missing_effect customer_notified"}},
	"refund-duplicate": {commitlayer.StatusFail, []string{"duplicate_effect refund"}},
	"cancel-ok":        {commitlayer.StatusPass, nil},
	"cancel-refunded":  {commitlayer.StatusFail, []string{"forbidden_effect no_refund"}},
	"payout-1":         {commitlayer.StatusPass, nil},
	"payout-2":         {commitlayer.StatusPass, nil},
	"payout-3":         {commitlayer.StatusFail, []string{"limit_exceeded daily_payout_total"}},
	"deploy-unseen": {commitlayer.StatusUnknown, []string{"source_unavailable deployed", "source_unavailable healthy",
		"source_unavailable service_not_degraded", "source_unavailable deploys_per_day", "source_unavailable unhealthy",
		"source_unavailable other_environment"}},
}

func findingsOf(v commitlayer.Verdict) []string {
	var out []string
	for _, f := range v.Findings {
		out = append(out, string(f.Code)+" "+f.Check)
	}
	return out
}

func TestSandboxContracts(t *testing.T) {
	args := sandboxArgs(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitFail, Main(args, &stdout, &stderr), "%s%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "9 actions: 4 PASS, 4 FAIL, 1 UNKNOWN")

	results := runSandbox(t)
	require.Len(t, results, len(wantSandbox))
	for _, r := range results {
		want, ok := wantSandbox[r.Action.ID]
		require.True(t, ok, r.Action.ID)
		require.Equal(t, want.status, r.Verdict.Status, "%s: %s", r.Action.ID, r.Verdict.Summary())
		require.Equal(t, want.findings, findingsOf(r.Verdict), r.Action.ID)
		require.False(t, r.Verdict.Provisional, "settled by default")
	}
}

// runSandbox runs Verify on the sandbox fixture at a fixed time.
func runSandbox(t *testing.T) []Result {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "sandbox", "contracts", "*.yaml"))
	require.NoError(t, err)
	cs, err := LoadContracts(paths)
	require.NoError(t, err)
	facts, err := readFile(filepath.Join("testdata", "sandbox", "facts.ndjson"), ReadFacts)
	require.NoError(t, err)
	actions, err := readFile(filepath.Join("testdata", "sandbox", "actions.ndjson"), ReadActions)
	require.NoError(t, err)
	at := time.Date(2026, 11, 9, 0, 0, 0, 0, time.UTC)
	results, err := Verify(cs, "actions.ndjson", actions, facts, Options{At: at})
	require.NoError(t, err)
	return results
}
