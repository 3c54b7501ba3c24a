package recheck

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/check"
)

// The fixtures: a payout contract with a daily limit per agent, two
// payouts by one agent (the second over the limit) and their facts.
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

const (
	factP1 = `{"source":"ledger","type":"payout_sent","subject":"account:a_1","external_id":"l1","occurred_at":"2026-11-01T10:00:01Z","attrs":{"amount":500}}`
	factP2 = `{"source":"ledger","type":"payout_sent","subject":"account:a_2","external_id":"l2","occurred_at":"2026-11-01T11:00:01Z","attrs":{"amount":700}}`
	actP1  = `{"id":"p1","contract":"send_payout","agent":"bot","subject":"account:a_1","requested_at":"2026-11-01T10:00:00Z","params":{"amount":500},"claim":{"status":"success"}}`
	actP2  = `{"id":"p2","contract":"send_payout","agent":"bot","subject":"account:a_2","requested_at":"2026-11-01T11:00:00Z","params":{"amount":700},"claim":{"status":"success"}}`
)

func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }

// payoutEntry is a payout scenario: two payouts by one agent, the second
// over the daily limit, its verdict the one Verify gives (as the service
// would have stored it).
func payoutEntry(t *testing.T, unreachable map[string]string) BundleEntry {
	t.Helper()
	var facts []commitlayer.Fact
	for _, s := range []string{factP1, factP2} {
		var f commitlayer.Fact
		require.NoError(t, json.Unmarshal([]byte(s), &f))
		facts = append(facts, f)
	}
	var acts []commitlayer.Action
	for _, s := range []string{actP1, actP2} {
		var a commitlayer.Action
		require.NoError(t, json.Unmarshal([]byte(s), &a))
		a.Trace = json.RawMessage(`{"big":"trace"}`)
		acts = append(acts, a)
	}
	e := BundleEntry{Scenario: "payout/daily", Main: "p2", Facts: facts, Actions: acts,
		Contracts: []BundleContract{{ID: "send_payout", Version: 1, Source: payout}},
		Connected: []string{"ledger"}, Unreachable: unreachable}
	cs, err := e.compile()
	require.NoError(t, err)
	lines := []check.Line[commitlayer.Action]{{Value: acts[0], Line: 1}, {Value: acts[1], Line: 2}}
	res, err := check.Verify(cs, "x", lines, facts, check.Options{At: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC),
		Connected: e.Connected, Unreachable: unreachable})
	require.NoError(t, err)
	e.Verdict = res[1].Verdict
	e.Verdict.Version = 3
	return e
}

func writeBundle(t *testing.T, dir, name string, entries ...BundleEntry) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, WriteBundleFile(p, BundleHeader{RunID: "run-1", Commit: "abc"}, entries))
	return p
}

func TestBundleRoundTripReproduces(t *testing.T) {
	dir := t.TempDir()
	fail := payoutEntry(t, nil)
	require.Equal(t, commitlayer.StatusFail, fail.Verdict.Status)
	down := payoutEntry(t, map[string]string{"ledger": "timeout"})
	down.Scenario = "payout/ledger_down"
	require.Equal(t, commitlayer.StatusUnknown, down.Verdict.Lenses.Outcome)
	require.Equal(t, []string{"ledger"}, down.Verdict.UnavailableSources)
	p := writeBundle(t, dir, "latest"+BundleSuffix, fail, down)
	writeResults(t, filepath.Join(dir, "latest.json"), "abc", fail, down)

	b, err := ReadBundleFile(p)
	require.NoError(t, err)
	require.Equal(t, BundleFormat, b.Header.Format)
	require.Equal(t, "run-1", b.Header.RunID)
	require.Equal(t, 2, b.Header.Scenarios)
	require.Len(t, b.Entries, 2)
	for _, a := range b.Entries[0].Value.Actions {
		require.Nil(t, a.Trace, "traces are left out of the bundle")
	}
	res, err := VerifyBundle(b)
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, r := range res {
		require.Empty(t, r.Mismatch, r.Name)
		require.Equal(t, "p2", r.Action.ID)
	}
	require.Equal(t, "payout/daily", res[0].Name)
	require.Equal(t, commitlayer.CodeLimitExceeded, res[0].Verdict.Findings[0].Code)
	require.Equal(t, commitlayer.StatusUnknown, res[1].Verdict.Lenses.Outcome)
	require.Equal(t, commitlayer.CodeSourceUnavailable, res[1].Verdict.Findings[0].Code)

	for _, arg := range []string{filepath.Join(dir, "latest.json"), p} {
		var stdout, stderr bytes.Buffer
		code := Main([]string{"--results", arg}, &stdout, &stderr)
		require.Equal(t, check.ExitFail, code, stderr.String())
		require.Empty(t, stderr.String())
		require.Contains(t, stdout.String(), "FAIL    payout/daily: send_payout p2 on account:a_2")
		require.Contains(t, stdout.String(), "payout/ledger_down: send_payout p2")
		require.Contains(t, stdout.String(), "2 of 2 recorded verdicts reproduced, 0 mismatches")
	}

	// Gzip keeps it small: the bundle is smaller than its JSON.
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	plain, err := json.Marshal([]BundleEntry{fail, down})
	require.NoError(t, err)
	require.Less(t, len(raw), len(plain))
}

// writeResults writes a sandbox results file whose rows show the entries'
// recorded verdicts.
func writeResults(t *testing.T, path, commit string, entries ...BundleEntry) {
	t.Helper()
	type row struct {
		ID      string              `json:"id"`
		Verdict commitlayer.Verdict `json:"verdict"`
	}
	doc := struct {
		Commit    string `json:"commit"`
		Scenarios []row  `json:"scenarios"`
	}{Commit: commit}
	for _, e := range entries {
		doc.Scenarios = append(doc.Scenarios, row{ID: e.Scenario, Verdict: e.Verdict})
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// TestResultsFileMustMatchItsBundle: given latest.json, check compares the
// bundle with the rows — another commit is bad input, a row showing
// another verdict is a mismatch.
func TestResultsFileMustMatchItsBundle(t *testing.T) {
	dir := t.TempDir()
	e := payoutEntry(t, nil)
	writeBundle(t, dir, "latest"+BundleSuffix, e)
	results := filepath.Join(dir, "latest.json")

	writeResults(t, results, "def", e)
	var stdout, stderr bytes.Buffer
	require.Equal(t, check.ExitBadInput, Main([]string{"--results", results}, &stdout, &stderr))
	require.Contains(t, stderr.String(), results+`: its commit "def" is not the bundle's "abc"`)

	other := e
	other.Verdict.Status = commitlayer.StatusPass
	writeResults(t, results, "abc", other)
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, check.ExitFail, Main([]string{"--results", results}, &stdout, &stderr), stderr.String())
	require.Contains(t, stdout.String(), "MISMATCH with the verdict recorded in the run: the row in "+results+" shows PASS")
	require.Contains(t, stdout.String(), "0 of 1 recorded verdicts reproduced, 1 mismatch")

	require.NoError(t, os.WriteFile(results, []byte("{not json"), 0o600))
	stderr.Reset()
	require.Equal(t, check.ExitBadInput, Main([]string{"--results", results}, &stdout, &stderr))
	require.Contains(t, stderr.String(), results+": not a sandbox results file")
}

func TestBundleMismatchIsReported(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(*BundleEntry)
		want   string
	}{
		{"status", func(e *BundleEntry) {
			e.Verdict.Status = commitlayer.StatusPass
			e.Verdict.Lenses.Policy = commitlayer.StatusPass
		}, "status: recorded PASS, check FAIL"},
		{"a fact missing", func(e *BundleEntry) { e.Facts = e.Facts[1:] }, "findings: recorded 1, check 0"},
		{"a finding's hint", func(e *BundleEntry) { e.Verdict.Findings[0].Hint = "retry_read" }, "findings[0]"},
		{"unavailable", func(e *BundleEntry) { e.Unreachable = map[string]string{"ledger": "refused"} }, "unavailable_sources"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e := payoutEntry(t, nil)
			tc.tamper(&e)
			p := writeBundle(t, dir, "run"+BundleSuffix, e)
			junit := filepath.Join(dir, "out.xml")
			var stdout, stderr bytes.Buffer
			code := Main([]string{"--results", p, "--junit", junit}, &stdout, &stderr)
			require.Equal(t, check.ExitFail, code)
			require.Contains(t, stdout.String(), "MISMATCH with the verdict recorded in the run: ")
			require.Contains(t, stdout.String(), tc.want)
			require.Contains(t, stdout.String(), "0 of 1 recorded verdicts reproduced, 1 mismatch")
			b, err := os.ReadFile(junit)
			require.NoError(t, err)
			var doc struct {
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
			require.NoError(t, xml.Unmarshal(b, &doc))
			require.Equal(t, 1, doc.Failures)
			c := doc.Suites[0].Cases[0]
			require.NotNil(t, c.Failure)
			require.Equal(t, "MISMATCH", c.Failure.Type)
			require.True(t, strings.HasPrefix(c.Name, "payout/daily p2 "), c.Name)
		})
	}

	// A PASS that differs still exits 1.
	e := payoutEntry(t, nil)
	e.Actions, e.Facts = e.Actions[1:], e.Facts[1:] // p2 alone is within the limit
	e.Verdict.Status = commitlayer.StatusPass       // recorded PASS but claims a finding
	res, err := VerifyBundle(Bundle{File: "b", Header: BundleHeader{Format: BundleFormat, Scenarios: 1},
		Entries: []check.Line[BundleEntry]{{Value: e, Line: 2}}})
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusPass, res[0].Verdict.Status)
	require.NotEmpty(t, res[0].Mismatch)
	require.Equal(t, check.ExitFail, check.ExitCode(res))
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

func TestBundleBadInput(t *testing.T) {
	good := payoutEntry(t, nil)
	line := func(mut func(*BundleEntry)) string {
		e := good
		e.Actions = append([]commitlayer.Action(nil), good.Actions...)
		e.Facts = append([]commitlayer.Fact(nil), good.Facts...)
		e.Verdict.Findings = append([]commitlayer.Finding(nil), good.Verdict.Findings...)
		if mut != nil {
			mut(&e)
		}
		b, err := json.Marshal(e)
		require.NoError(t, err)
		return string(b)
	}
	header := func(n int) string {
		return `{"format":"` + BundleFormat + `","scenarios":` + string(rune('0'+n)) + `}`
	}
	var full bytes.Buffer
	require.NoError(t, WriteBundle(&full, BundleHeader{}, []BundleEntry{good}))
	tests := []struct {
		name    string
		content []byte
		want    string
	}{
		{"empty", nil, "x.gz: empty: no check bundle header"},
		{"not json", []byte("hello\n"), "x.gz:1: not a check bundle header"},
		{"results json, not a bundle", []byte(`{"commit":"abc","scenarios":[]}` + "\n"), "x.gz:1: not a check bundle header"},
		{"another format", []byte(`{"format":"other/2","scenarios":1}` + "\n"), `x.gz:1: format "other/2" is not`},
		{"unknown field", gz(t, lines(header(1), `{"scenario":"a","bogus":1}`)), `x.gz:2: not a scenario of the expected shape: json: unknown field "bogus"`},
		{"no main", gz(t, lines(header(1), line(func(e *BundleEntry) { e.Main = "p9" }))), `x.gz:2: scenario "payout/daily": main: action "p9" is not among the actions`},
		{"verdict of another action", gz(t, lines(header(1), line(func(e *BundleEntry) { e.Verdict.ActionID = "p1" }))), `verdict: is of action "p1", not the main action "p2"`},
		{"bad fact", gz(t, lines(header(1), line(func(e *BundleEntry) { e.Facts[0].Source = "" }))), `x.gz:2: scenario "payout/daily": facts[0]`},
		{"bad status", gz(t, lines(header(1), line(func(e *BundleEntry) { e.Verdict.Status = "MAYBE" }))), `status "MAYBE"`},
		{"no contracts", gz(t, lines(header(1), line(func(e *BundleEntry) { e.Contracts = nil }))), "contracts: none recorded"},
		{"truncated count", gz(t, lines(header(2), line(nil))), "x.gz: the header counts 2 scenarios, the file has 1 (truncated?)"},
		{"no scenarios", gz(t, lines(header(0))), "x.gz: no scenarios to check"},
		{"truncated gzip", full.Bytes()[:full.Len()-12], "x.gz:"},
		{"contract does not compile", gz(t, lines(header(1), line(func(e *BundleEntry) {
			e.Contracts = []BundleContract{{ID: "send_payout", Version: 1, Source: "id: send_payout\nkind: nonsense\n"}}
		}))), `x.gz:2: scenario "payout/daily": contracts[0] (send_payout)`},
		{"contract of another id", gz(t, lines(header(1), line(func(e *BundleEntry) {
			e.Contracts = []BundleContract{{ID: "send_payout", Version: 1, Source: note}}
		}))), `its source defines "note_anything", not "send_payout"`},
		{"action of an unknown contract", gz(t, lines(header(1), line(func(e *BundleEntry) {
			e.Actions[0].Contract = "other"
		}))), `x.gz:2: scenario "payout/daily": contract "other" is not among`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.gz") // any name but .json is the bundle itself
			require.NoError(t, os.WriteFile(p, tc.content, 0o600))
			var stdout, stderr bytes.Buffer
			code := Main([]string{"--results", p}, &stdout, &stderr)
			require.Equal(t, check.ExitBadInput, code, stdout.String())
			require.Contains(t, stderr.String(), "commitlayer check: "+p[:len(p)-len("x.gz")])
			require.Contains(t, stderr.String(), tc.want)
			require.Empty(t, stdout.String())
		})
	}
}

func TestResultsFlagBadUse(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "latest.json")
	require.NoError(t, os.WriteFile(results, []byte(`{}`), 0o600))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no bundle beside the results", []string{"--results", results},
			results + ": no check bundle beside it (" + filepath.Join(dir, "latest"+BundleSuffix)},
		{"no results file", []string{"--results", filepath.Join(dir, "nope.json")}, filepath.Join(dir, "nope.json") + ": stat"},
		{"with --facts", []string{"--results", results, "--facts", "f.ndjson"}, "--results takes its contracts"},
		{"no file", []string{"--results", ""}, "--results takes its contracts"},
		{"with --contract", []string{"--results", results, "--contract", "c.yaml"}, "--results takes its contracts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.Equal(t, check.ExitBadInput, Main(tc.args, &stdout, &stderr))
			require.Contains(t, stderr.String(), tc.want)
		})
	}
	require.Equal(t, filepath.Join("a", "llm_fake-openai"+BundleSuffix), BundlePath(filepath.Join("a", "llm_fake-openai.json")))
}

func TestAsks(t *testing.T) {
	for args, want := range map[string]bool{
		"--results x.json":                        true,
		"-results x.json --junit j.xml":           true,
		"--results=x.json":                        true,
		"--contract c.yaml --facts f --actions a": false,
		"--facts results":                         false,
		"-- --results":                            false,
	} {
		require.Equal(t, want, Asks(strings.Fields(args)), args)
	}
}
