package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// factIn is a fact on the wire. The time is read as a string and attrs as
// any JSON value, so that an error names the fact and the field.
type factIn struct {
	Source     string   `json:"source"`
	Type       string   `json:"type"`
	Subject    string   `json:"subject"`
	ExternalID string   `json:"external_id"`
	OccurredAt string   `json:"occurred_at"`
	Attrs      any      `json:"attrs"`
	Links      []string `json:"links"`
	// Seq is accepted so a fact read back can be posted again; the store
	// assigns its own.
	Seq json.RawMessage `json:"seq"`
	// normalized, when not nil, is attrs already read and normalized
	// (by scanFacts), and Attrs is not looked at; subjects, when not nil,
	// is links already read (by scanFacts: none holds a NUL), and Links
	// is not looked at.
	normalized commitlayer.Attrs
	subjects   []commitlayer.Subject
}

// decodeFacts reads and validates the body of POST /v1/facts,
// {"facts":[Fact…]}: every fact must pass Fact.Validate, with attrs
// normalized. The first bad fact rejects the batch, named by index and
// field ("facts[3].subject: …"). The array is read one fact at a time, so
// even a JSON type error names the fact. A key given twice anywhere is
// refused (invalid_json), and so is an occurred_at after the bound.
//
// A body is read in one pass (scanFacts) when it holds no error; any other
// is read again by decodeFactsData, which says what is wrong with it.
func decodeFacts(body io.Reader, bound futureBound) ([]commitlayer.Fact, error) {
	return decodeFactsSized(body, -1, bound)
}

// maxSizeHint bounds the room made for a body ahead of reading it, on the
// word of its Content-Length.
const maxSizeHint = 1 << 20

// decodeFactsSized is decodeFacts for a body of about size bytes (-1:
// unknown), which it makes room for (up to maxSizeHint) before reading.
func decodeFactsSized(body io.Reader, size int64, bound futureBound) ([]commitlayer.Fact, error) {
	var text strings.Builder
	if size > 0 {
		text.Grow(int(min(size, maxSizeHint)) + 1)
	}
	if _, err := io.Copy(&text, body); err != nil {
		return nil, jsonError(err)
	}
	if facts, ok := scanFacts(text.String(), bound); ok {
		return facts, nil
	}
	return decodeFactsData([]byte(text.String()), bound)
}

// decodeFactsData is decodeFacts for a body already read, the careful way:
// a full duplicate-key scan, then encoding/json one fact at a time.
func decodeFactsData(data []byte, bound futureBound) ([]commitlayer.Fact, error) {
	if err := checkDuplicateKeys(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	bad := func(format string, args ...any) error {
		return errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err)
	}
	if tok != json.Delim('{') {
		return nil, bad("body must be a JSON object {\"facts\": […]}")
	}
	var (
		facts []commitlayer.Fact
		seen  bool
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		if key, _ := tok.(string); key != "facts" {
			return nil, bad("unknown field %q", fmt.Sprint(tok))
		}
		if seen {
			return nil, bad("facts: is given twice")
		}
		seen = true
		if tok, err = dec.Token(); err != nil {
			return nil, jsonError(err)
		}
		switch tok {
		case nil:
			return nil, bad("facts: is required (an array of facts)")
		case json.Delim('['):
		default:
			return nil, bad("facts: expected an array, got %s", jsonKind(tok))
		}
		for i := 0; dec.More(); i++ {
			var in factIn
			if err := dec.Decode(&in); err != nil {
				return nil, jsonErrorAt(fmt.Sprintf("facts[%d]", i), err)
			}
			f, err := in.fact(bound)
			if err != nil {
				return nil, bad("facts[%d].%s", i, err.Error())
			}
			facts = append(facts, f)
		}
		if _, err := dec.Token(); err != nil { // ]
			return nil, jsonError(err)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, jsonError(err)
	}
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
	case err == nil:
		return nil, errorf(http.StatusBadRequest, codeInvalidJSON, "body holds more than one JSON value")
	default:
		return nil, jsonError(err)
	}
	if !seen {
		return nil, bad("facts: is required (an array of facts)")
	}
	if len(facts) == 0 {
		return nil, bad("facts: at least one fact is required")
	}
	return facts, nil
}

// jsonKind names the JSON kind of a token.
func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('{') {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// futureBound is the latest occurred_at or requested_at accepted: the
// server's clock plus the allowed skew. The zero bound accepts any time.
type futureBound struct {
	Latest time.Time
	Skew   time.Duration
}

// bound is the futureBound of a request arriving now.
func (s *Server) bound() futureBound {
	return futureBound{Latest: s.now().UTC().Add(s.maxFutureSkew), Skew: s.maxFutureSkew}
}

// check refuses a time before minTime (year 1 is "unset" inside the
// service: never a value) or after the bound.
func (b futureBound) check(t time.Time) error {
	if t.Before(minTime) {
		return fmt.Errorf("must be %s or later", minTime.Format(time.RFC3339))
	}
	if !b.Latest.IsZero() && t.After(b.Latest) {
		return fmt.Errorf("%s is later than %s, the server's clock plus %s",
			t.Format(time.RFC3339Nano), b.Latest.UTC().Format(time.RFC3339Nano), b.Skew)
	}
	return nil
}

// fact converts and validates, refusing an occurred_at after the bound;
// its errors read "field: reason".
func (in *factIn) fact(bound futureBound) (commitlayer.Fact, error) {
	f := commitlayer.Fact{
		Source:     in.Source,
		Type:       in.Type,
		Subject:    commitlayer.Subject(in.Subject),
		ExternalID: in.ExternalID,
	}
	for _, s := range []struct{ field, v string }{
		{"source", in.Source}, {"type", in.Type}, {"subject", in.Subject}, {"external_id", in.ExternalID},
	} {
		if err := noNUL(s.field, s.v); err != nil {
			return f, err
		}
	}
	if in.OccurredAt != "" {
		t, err := parseTime(in.OccurredAt)
		if err == nil {
			err = bound.check(t)
		}
		if err != nil {
			return f, fmt.Errorf("occurred_at: %w", err)
		}
		f.OccurredAt = t
	}
	attrs := in.normalized
	if attrs == nil {
		var err error
		if attrs, err = decodeAttrs(in.Attrs); err != nil {
			return f, fmt.Errorf("attrs: %w", err)
		}
	}
	f.Attrs = attrs
	f.Links = in.subjects
	if len(in.Links) > 0 {
		f.Links = make([]commitlayer.Subject, 0, len(in.Links))
	}
	for i, l := range in.Links {
		if strings.IndexByte(l, 0) >= 0 {
			return f, noNUL(fmt.Sprintf("links[%d]", i), l)
		}
		f.Links = append(f.Links, commitlayer.Subject(l))
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	return f, nil
}
