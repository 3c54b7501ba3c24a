// Package recheck verifies a finished sandbox run again with no server:
// `commitlayer sandbox` (and demo) write a check bundle beside the run's
// results (Write, reading the run's tenants from the store), and
// `commitlayer check --results` (Main) reads it back and evaluates every
// scenario's action again with the engine `commitlayer check` uses
// (check.Verify), comparing each verdict with the one the service stored.
package recheck

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
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/check"
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
	Entries []check.Line[BundleEntry]
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
	sc.Buffer(make([]byte, 64<<10), check.MaxLineBytes)
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
			return Bundle{}, &check.InputError{File: file, Line: n, Err: fmt.Errorf("scenario %q: %w", e.Scenario, err)}
		}
		b.Entries = append(b.Entries, check.Line[BundleEntry]{Value: e, Line: n})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Bundle{}, inputErr(file, n+1, "line is longer than %d bytes", check.MaxLineBytes)
		}
		// A truncated or corrupt gzip stream lands here.
		return Bundle{}, &check.InputError{File: file, Line: n + 1, Err: err}
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
	f, err := os.Open(path)
	if err != nil {
		return Bundle{}, &check.InputError{File: path, Err: err}
	}
	defer f.Close()
	return ReadBundle(f, path)
}

func inputErr(file string, line int, format string, args ...any) *check.InputError {
	return &check.InputError{File: file, Line: line, Err: fmt.Errorf(format, args...)}
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
