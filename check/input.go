// Package check verifies actions against facts and contracts read from
// files, with no server: the core of `commitlayer check`, a CI gate. It runs
// the service's engine (contracts.Contract.Evaluate) on what the Evaluate
// activity would gather: all the facts and all the other actions (the
// engine keeps those that matter), and as coverage the sources with a fact
// plus any declared connected.
package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// MaxLineBytes bounds one NDJSON line.
const MaxLineBytes = 8 << 20

// InputError is bad input in a file, at a line (0 for the whole file).
type InputError struct {
	File string
	Line int
	Err  error
}

func (e *InputError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

func inputErr(file string, line int, format string, args ...any) *InputError {
	return &InputError{File: file, Line: line, Err: fmt.Errorf(format, args...)}
}

// Contracts are compiled contracts by id.
type Contracts map[string]*contracts.Contract

// LoadContracts parses each contract file; a contract id defined twice is bad input.
func LoadContracts(paths []string) (Contracts, error) {
	out := Contracts{}
	from := map[string]string{}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, &InputError{File: p, Err: err}
		}
		c, err := contracts.Parse(src)
		if err != nil { // its errors name their own lines
			return nil, &InputError{File: p, Err: err}
		}
		if prev, ok := from[c.ID()]; ok {
			return nil, inputErr(p, 0, "contract %s is also defined in %s", c.ID(), prev)
		}
		from[c.ID()] = p
		out[c.ID()] = c
	}
	return out, nil
}

// Line is a value read from line N of an NDJSON file.
type Line[T any] struct {
	Value T
	Line  int
}

// readNDJSON strictly decodes each non-blank line of r and calls check on it.
func readNDJSON[T any](r io.Reader, file string, check func(*T) error) ([]Line[T], error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	var out []Line[T]
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var v T
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, inputErr(file, n, "not a JSON object of the expected shape: %v", err)
		}
		if dec.More() {
			return nil, inputErr(file, n, "more than one JSON value on the line")
		}
		if err := check(&v); err != nil {
			return nil, &InputError{File: file, Line: n, Err: err}
		}
		out = append(out, Line[T]{Value: v, Line: n})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, inputErr(file, n+1, "line is longer than %d bytes", MaxLineBytes)
		}
		return nil, &InputError{File: file, Line: n + 1, Err: err}
	}
	return out, nil
}

// ReadFacts reads facts, one JSON object a line as POST /v1/facts takes
// them; a repeated (source, external_id) is dropped, as the store does.
func ReadFacts(r io.Reader, file string) ([]commitlayer.Fact, error) {
	lines, err := readNDJSON(r, file, func(f *commitlayer.Fact) error {
		f.Seq = 0
		if err := f.Validate(); err != nil {
			return err
		}
		if f.Attrs == nil {
			f.Attrs = commitlayer.Attrs{}
		}
		f.OccurredAt = f.OccurredAt.UTC()
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := make([]commitlayer.Fact, 0, len(lines))
	for _, l := range lines {
		k := l.Value.Source + "\x00" + l.Value.ExternalID
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, l.Value)
	}
	return out, nil
}

// ReadActions reads actions, one JSON object a line as POST /v1/actions
// takes them, requested_at required (no server defaults it). An action
// without an id gets "line-N"; a repeated id is bad input.
func ReadActions(r io.Reader, file string) ([]Line[commitlayer.Action], error) {
	lines, err := readNDJSON(r, file, func(a *commitlayer.Action) error { return a.Validate() })
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i := range lines {
		a := &lines[i].Value
		if a.ID == "" {
			a.ID = fmt.Sprintf("line-%d", lines[i].Line)
		}
		if prev, ok := seen[a.ID]; ok {
			return nil, inputErr(file, lines[i].Line, "id %q is also the id of the action on line %d", a.ID, prev)
		}
		seen[a.ID] = lines[i].Line
		a.RequestedAt = a.RequestedAt.UTC()
		if a.Params == nil {
			a.Params = commitlayer.Attrs{}
		}
	}
	return lines, nil
}

// readFile opens path and reads it with read.
func readFile[T any](path string, read func(io.Reader, string) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, &InputError{File: path, Err: err}
	}
	defer f.Close()
	return read(f, path)
}
