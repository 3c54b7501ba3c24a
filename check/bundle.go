package check

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// A bundle is what a sandbox run verified, recorded beside its results
// (latest.json → latest.check.ndjson.gz) so `commitlayer check --results`
// can verify every scenario's action again with no server and compare with
// the verdict the service stored. It is gzipped NDJSON: a header line, then
// one line per scenario with the contracts, every fact and action of the
// scenario's tenant, the sources connected and unreachable, and the latest
// verdict stored for the scenario's main action.

// BundleFormat names the bundle's format in its header line.
const BundleFormat = "commitlayer-check-bundle/1"

// BundleSuffix follows a results file's base name: latest.json's bundle is
// latest.check.ndjson.gz.
const BundleSuffix = ".check.ndjson.gz"

// BundleHeader is a bundle's first line.
type BundleHeader struct {
	Format string `json:"format"`
	// RunID and Commit say which run and code recorded the bundle.
	RunID  string `json:"run_id,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Scenarios counts the lines that follow.
	Scenarios int `json:"scenarios"`
}

// BundleContract is one contract version a scenario's actions name.
type BundleContract struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	Source  string `json:"source"`
}

// BundleEntry is one scenario of a run: what its tenant held when the run
// finished.
type BundleEntry struct {
	Scenario string `json:"scenario"`
	// Attempt numbers a repeated scenario's runs (0: not repeated).
	Attempt   int                `json:"attempt,omitempty"`
	Contracts []BundleContract   `json:"contracts"`
	Facts     []commitlayer.Fact `json:"facts"`
	// Actions are every action of the tenant (the scenario's earlier
	// actions and its main one) in requested order, without traces.
	Actions []commitlayer.Action `json:"actions"`
	// Main is the id of the scenario's own action, the one verified.
	Main string `json:"main"`
	// Connected are the sources that had reported; Unreachable those of
	// them the recorded verdict could not read (source → why).
	Connected   []string          `json:"connected"`
	Unreachable map[string]string `json:"unreachable,omitempty"`
	// Verdict is the latest verdict the service stored for Main.
	Verdict commitlayer.Verdict `json:"verdict"`
}

// BundlePath is the bundle beside a results file (latest.json →
// latest.check.ndjson.gz in the same directory).
func BundlePath(resultsPath string) string {
	return strings.TrimSuffix(resultsPath, filepath.Ext(resultsPath)) + BundleSuffix
}

// WriteBundle writes the header and entries, gzipped, to w.
func WriteBundle(w io.Writer, h BundleHeader, entries []BundleEntry) error {
	h.Format = BundleFormat
	h.Scenarios = len(entries)
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	if err := enc.Encode(h); err != nil {
		return fmt.Errorf("write bundle header: %w", err)
	}
	for i := range entries {
		e := entries[i]
		e.Actions = slices.Clone(e.Actions)
		for j := range e.Actions {
			e.Actions[j].Trace = nil // the engine does not read it; it is large
		}
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("write bundle entry %s: %w", e.Scenario, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}

// WriteBundleFile writes the bundle to path through a temporary file, so a
// failed write leaves no half bundle.
func WriteBundleFile(path string, h BundleHeader, entries []BundleEntry) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bundle-*")
	if err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriter(tmp)
	if err := WriteBundle(bw, h, entries); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	return nil
}

// Bundle is a read bundle: its header and entries, each with its line.
type Bundle struct {
	File    string
	Header  BundleHeader
	Entries []Line[BundleEntry]
}

// ReadBundle reads a bundle (gzipped, or plain NDJSON) strictly: the
// header first, then entries whose contracts compile, whose facts and
// actions are valid, whose main action is among its actions and whose
// verdict is of it. Errors name the file and line.
func ReadBundle(r io.Reader, file string) (Bundle, error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return Bundle{}, inputErr(file, 0, "not a gzip file: %v", err)
		}
		defer zr.Close()
		src = zr
	}
	b := Bundle{File: file}
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	n := 0
	header := false
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !header {
			if err := strictJSON(line, &b.Header); err != nil {
				return Bundle{}, inputErr(file, n, "not a check bundle header: %v", err)
			}
			if b.Header.Format != BundleFormat {
				return Bundle{}, inputErr(file, n, "format %q is not %q (not a check bundle, or from another version)", b.Header.Format, BundleFormat)
			}
			header = true
			continue
		}
		var e BundleEntry
		if err := strictJSON(line, &e); err != nil {
			return Bundle{}, inputErr(file, n, "not a scenario of the expected shape: %v", err)
		}
		if err := e.validate(); err != nil {
			return Bundle{}, &InputError{File: file, Line: n, Err: fmt.Errorf("scenario %q: %w", e.Scenario, err)}
		}
		b.Entries = append(b.Entries, Line[BundleEntry]{Value: e, Line: n})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Bundle{}, inputErr(file, n+1, "line is longer than %d bytes", MaxLineBytes)
		}
		// A truncated or corrupt gzip stream lands here.
		return Bundle{}, &InputError{File: file, Line: n + 1, Err: err}
	}
	switch {
	case !header:
		return Bundle{}, inputErr(file, 0, "empty: no check bundle header")
	case len(b.Entries) == 0:
		return Bundle{}, inputErr(file, 0, "no scenarios to check")
	case len(b.Entries) != b.Header.Scenarios:
		return Bundle{}, inputErr(file, 0, "the header counts %d scenarios, the file has %d (truncated?)", b.Header.Scenarios, len(b.Entries))
	}
	return b, nil
}

// ReadBundleFile opens and reads a bundle.
func ReadBundleFile(path string) (Bundle, error) {
	return readFile(path, ReadBundle)
}

func strictJSON(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// validate checks what Verify relies on.
func (e *BundleEntry) validate() error {
	if e.Scenario == "" {
		return errors.New("scenario is required")
	}
	if len(e.Contracts) == 0 {
		return errors.New("contracts: none recorded")
	}
	for i := range e.Facts {
		if err := e.Facts[i].Validate(); err != nil {
			return fmt.Errorf("facts[%d]: %w", i, err)
		}
		if e.Facts[i].Attrs == nil {
			e.Facts[i].Attrs = commitlayer.Attrs{}
		}
		e.Facts[i].OccurredAt = e.Facts[i].OccurredAt.UTC()
	}
	main := false
	ids := map[string]bool{}
	for i := range e.Actions {
		a := &e.Actions[i]
		if a.ID == "" {
			return fmt.Errorf("actions[%d]: id is required", i)
		}
		if err := a.Validate(); err != nil {
			return fmt.Errorf("actions[%d]: %w", i, err)
		}
		if ids[a.ID] {
			return fmt.Errorf("actions[%d]: id %q appears twice", i, a.ID)
		}
		ids[a.ID] = true
		a.RequestedAt = a.RequestedAt.UTC()
		if a.Params == nil {
			a.Params = commitlayer.Attrs{}
		}
		main = main || a.ID == e.Main
	}
	switch {
	case e.Main == "":
		return errors.New("main is required")
	case !main:
		return fmt.Errorf("main: action %q is not among the actions", e.Main)
	case e.Verdict.ActionID != e.Main:
		return fmt.Errorf("verdict: is of action %q, not the main action %q", e.Verdict.ActionID, e.Main)
	case !e.Verdict.Status.Valid():
		return fmt.Errorf("verdict: status %q is not PASS, FAIL or UNKNOWN", e.Verdict.Status)
	case e.Verdict.EvaluatedAt.IsZero():
		return errors.New("verdict: evaluated_at is required")
	}
	return nil
}

// contracts compiles the entry's contracts, one version per id.
func (e *BundleEntry) compile() (Contracts, error) {
	cs := Contracts{}
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
func VerifyBundle(b Bundle) ([]Result, error) {
	out := make([]Result, 0, len(b.Entries))
	for _, l := range b.Entries {
		e := l.Value
		cs, err := e.compile()
		if err != nil {
			return nil, &InputError{File: b.File, Line: l.Line, Err: fmt.Errorf("scenario %q: %w", e.Scenario, err)}
		}
		lines := make([]Line[commitlayer.Action], len(e.Actions))
		for i, a := range e.Actions {
			lines[i] = Line[commitlayer.Action]{Value: a, Line: l.Line}
		}
		res, err := Verify(cs, b.File, lines, slices.Clone(e.Facts), Options{
			At: e.Verdict.EvaluatedAt.UTC(), Connected: e.Connected, Unreachable: e.Unreachable,
		})
		if err != nil {
			var ie *InputError
			if errors.As(err, &ie) {
				ie.Err = fmt.Errorf("scenario %q: %w", e.Scenario, ie.Err)
			}
			return nil, err
		}
		var got Result
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
func sameRun(resultsPath string, b Bundle, results []Result) error {
	raw, err := os.ReadFile(resultsPath)
	if err != nil {
		return &InputError{File: resultsPath, Err: err}
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
