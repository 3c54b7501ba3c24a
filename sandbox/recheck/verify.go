package recheck

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/check"
	"github.com/commitlayer/commitlayer/contracts"
)

// Asks reports whether a `commitlayer check` command line asks for a
// sandbox run's re-check (--results): cmd hands those to Main, the others
// to check.Main.
func Asks(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "results" {
			return true
		}
	}
	return false
}

// Main runs `commitlayer check --results FILE [--junit FILE]` and returns
// its exit code (those of check.Main): FILE is a sandbox run's results
// (latest.json), whose bundle sits beside it, or the bundle itself
// (latest.check.ndjson.gz). Every scenario's action is verified again and
// its verdict compared with the one the service recorded; a mismatch is
// reported and exits 1.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("commitlayer check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	results := fs.String("results", "", "a sandbox run's results file (latest.json) or its check bundle (latest"+BundleSuffix+")")
	junit := fs.String("junit", "", "also write JUnit XML to this file")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stderr, "usage: commitlayer check --results sandbox/results/latest.json [--junit FILE]\n")
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return check.ExitBadInput
	case err != nil || fs.NArg() > 0 || *results == "":
		fmt.Fprint(stderr, "commitlayer check: --results takes its contracts, facts, actions, sources and times from the run's bundle: give it alone (with --junit)\n")
		return check.ExitBadInput
	}
	return check.Report(stdout, stderr, *junit, func() ([]check.Result, error) { return runResults(*results) })
}

// runResults verifies a sandbox run's bundle again: path is a results
// file (.json), whose bundle sits beside it, or the bundle itself.
func runResults(path string) ([]check.Result, error) {
	bundle := path
	if strings.EqualFold(filepath.Ext(path), ".json") {
		bundle = BundlePath(path)
		if _, err := os.Stat(bundle); err != nil {
			if _, rerr := os.Stat(path); rerr != nil {
				return nil, &check.InputError{File: path, Err: rerr}
			}
			return nil, inputErr(path, 0, "no check bundle beside it (%s: %v); a sandbox or demo run writes one with its results", bundle, err)
		}
	}
	b, err := ReadBundleFile(bundle)
	if err != nil {
		return nil, err
	}
	results, err := VerifyBundle(b)
	if err != nil || bundle == path {
		return results, err
	}
	if err := sameRun(path, b, results); err != nil {
		return nil, err
	}
	return results, nil
}

// contracts compiles the entry's contracts, one version per id.
func (e *BundleEntry) compile() (check.Contracts, error) {
	cs := check.Contracts{}
	for i, c := range e.Contracts {
		compiled, err := contracts.Parse([]byte(c.Source))
		if err != nil {
			return nil, fmt.Errorf("contracts[%d] (%s): %w", i, c.ID, err)
		}
		if compiled.ID() != c.ID {
			return nil, fmt.Errorf("contracts[%d]: its source defines %q, not %q", i, compiled.ID(), c.ID)
		}
		if _, dup := cs[c.ID]; dup {
			return nil, fmt.Errorf("contracts[%d]: contract %s is recorded twice (two versions cannot be checked together)", i, c.ID)
		}
		cs[c.ID] = compiled
	}
	return cs, nil
}

// VerifyBundle verifies each scenario's main action again with the
// scenario's contracts, facts, actions and coverage, at the time the
// recorded verdict was evaluated, and compares the verdicts: status,
// provisional, lenses, every finding (code, check, lens, message, facts,
// hint), unavailable sources and the claim. Each result names its
// scenario and says how it differs from the recorded verdict, if it does.
func VerifyBundle(b Bundle) ([]check.Result, error) {
	out := make([]check.Result, 0, len(b.Entries))
	for _, l := range b.Entries {
		e := l.Value
		cs, err := e.compile()
		if err != nil {
			return nil, &check.InputError{File: b.File, Line: l.Line, Err: fmt.Errorf("scenario %q: %w", e.Scenario, err)}
		}
		lines := make([]check.Line[commitlayer.Action], len(e.Actions))
		for i, a := range e.Actions {
			lines[i] = check.Line[commitlayer.Action]{Value: a, Line: l.Line}
		}
		res, err := check.Verify(cs, b.File, lines, slices.Clone(e.Facts), check.Options{
			At: e.Verdict.EvaluatedAt.UTC(), Connected: e.Connected, Unreachable: e.Unreachable,
		})
		if err != nil {
			var ie *check.InputError
			if errors.As(err, &ie) {
				ie.Err = fmt.Errorf("scenario %q: %w", e.Scenario, ie.Err)
			}
			return nil, err
		}
		var got check.Result
		for _, r := range res {
			if r.Action.ID == e.Main {
				got = r
			}
		}
		got.Line, got.Name = l.Line, scenarioName(e)
		got.Mismatch = verdictDiff(e.Verdict, got.Verdict)
		out = append(out, got)
	}
	return out, nil
}

func scenarioName(e BundleEntry) string {
	if e.Attempt > 0 {
		return fmt.Sprintf("%s#%d", e.Scenario, e.Attempt)
	}
	return e.Scenario
}

// comparableVerdict keeps what a verdict says: not its version or times' zones,
// and no difference between an empty list and none.
func comparableVerdict(v commitlayer.Verdict) commitlayer.Verdict {
	v.Version = 0
	v.EvaluatedAt, v.SettlesAt = v.EvaluatedAt.UTC().Truncate(time.Microsecond), v.SettlesAt.UTC().Truncate(time.Microsecond)
	if len(v.UnavailableSources) == 0 {
		v.UnavailableSources = nil
	}
	if len(v.Findings) == 0 {
		v.Findings = nil
	}
	v.Findings = slices.Clone(v.Findings)
	for i := range v.Findings {
		if len(v.Findings[i].Facts) == 0 {
			v.Findings[i].Facts = nil
		}
	}
	return v
}

// verdictDiff says how got differs from the recorded verdict, field by
// field ("" when it does not).
func verdictDiff(recorded, got commitlayer.Verdict) string {
	a, b := comparableVerdict(recorded), comparableVerdict(got)
	if reflect.DeepEqual(a, b) {
		return ""
	}
	var parts []string
	field := func(name string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			parts = append(parts, fmt.Sprintf("%s: recorded %v, check %v", name, x, y))
		}
	}
	field("status", a.Status, b.Status)
	field("provisional", a.Provisional, b.Provisional)
	field("lenses", a.Lenses, b.Lenses)
	field("unavailable_sources", a.UnavailableSources, b.UnavailableSources)
	field("claim_contradicted", a.ClaimContradicted, b.ClaimContradicted)
	field("contract", a.Contract, b.Contract)
	field("contract_version", a.ContractVersion, b.ContractVersion)
	field("evaluated_at", a.EvaluatedAt, b.EvaluatedAt)
	field("settles_at", a.SettlesAt, b.SettlesAt)
	if len(a.Findings) != len(b.Findings) {
		parts = append(parts, fmt.Sprintf("findings: recorded %d, check %d", len(a.Findings), len(b.Findings)))
	}
	for i := 0; i < min(len(a.Findings), len(b.Findings)); i++ {
		if !reflect.DeepEqual(a.Findings[i], b.Findings[i]) {
			parts = append(parts, fmt.Sprintf("findings[%d]: recorded %s %s %q %v %s, check %s %s %q %v %s", i,
				a.Findings[i].Code, a.Findings[i].Check, a.Findings[i].Message, a.Findings[i].Facts, a.Findings[i].Hint,
				b.Findings[i].Code, b.Findings[i].Check, b.Findings[i].Message, b.Findings[i].Facts, b.Findings[i].Hint))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "the verdicts differ")
	}
	return strings.Join(parts, "; ")
}

// resultsFile is what sameRun reads of a sandbox results file.
type resultsFile struct {
	Commit    string `json:"commit"`
	Scenarios []struct {
		ID      string `json:"id"`
		Error   string `json:"error"`
		Verdict struct {
			Status   commitlayer.Status    `json:"status"`
			Lenses   commitlayer.Lenses    `json:"lenses"`
			Findings []commitlayer.Finding `json:"findings"`
		} `json:"verdict"`
	} `json:"scenarios"`
}

// sameRun checks that the bundle beside a results file is of the same run:
// the same commit, and each scenario run once has the verdict its row
// shows (status, lenses, findings' codes, checks and messages). A row
// that differs is a mismatch on that scenario; a bundle of another commit
// is bad input.
func sameRun(resultsPath string, b Bundle, results []check.Result) error {
	raw, err := os.ReadFile(resultsPath)
	if err != nil {
		return &check.InputError{File: resultsPath, Err: err}
	}
	var rf resultsFile
	if err := json.Unmarshal(raw, &rf); err != nil {
		return inputErr(resultsPath, 0, "not a sandbox results file: %v", err)
	}
	if rf.Commit != b.Header.Commit {
		return inputErr(resultsPath, 0, "its commit %q is not the bundle's %q (%s): the bundle is of another run", rf.Commit, b.Header.Commit, b.File)
	}
	type rowVerdict struct {
		status   commitlayer.Status
		lenses   commitlayer.Lenses
		findings []string
	}
	keys := func(fs []commitlayer.Finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, fmt.Sprintf("%s %s %s %s", f.Code, f.Check, f.Lens, f.Message))
		}
		return out
	}
	rows := map[string][]rowVerdict{}
	for _, r := range rf.Scenarios {
		if r.Error == "" {
			rows[r.ID] = append(rows[r.ID], rowVerdict{r.Verdict.Status, r.Verdict.Lenses, keys(r.Verdict.Findings)})
		}
	}
	for i, l := range b.Entries {
		e := l.Value
		got, ok := rows[e.Scenario]
		if !ok {
			results[i].Mismatch = join(results[i].Mismatch, "no row of "+e.Scenario+" in "+resultsPath)
			continue
		}
		if len(got) != 1 || e.Attempt != 0 {
			continue // a repeated scenario's rows and tenants are not paired
		}
		want := rowVerdict{e.Verdict.Status, e.Verdict.Lenses, keys(e.Verdict.Findings)}
		if !reflect.DeepEqual(got[0], want) {
			results[i].Mismatch = join(results[i].Mismatch, fmt.Sprintf("the row in %s shows %s (%s/%s, %d findings), the bundle recorded %s (%s/%s, %d findings)",
				resultsPath, got[0].status, got[0].lenses.Outcome, got[0].lenses.Policy, len(got[0].findings),
				want.status, want.lenses.Outcome, want.lenses.Policy, len(want.findings)))
		}
	}
	return nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
