package api

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/commitlayer/commitlayer"
)

// factIn is a fact on the wire, its time a string so an error can say what
// an RFC 3339 time is.
type factIn struct {
	Source     string                `json:"source"`
	Type       string                `json:"type"`
	Subject    commitlayer.Subject   `json:"subject"`
	ExternalID string                `json:"external_id"`
	OccurredAt string                `json:"occurred_at"`
	Attrs      commitlayer.Attrs     `json:"attrs"`
	Links      []commitlayer.Subject `json:"links"`
	Seq        jsontext.Value        `json:"seq"` // accepted so a fact read back can be reposted; ignored
}

// decodeFacts reads and validates POST /v1/facts; the first bad fact
// rejects the batch, named by index and field ("facts[3].subject: …").
func decodeFacts(body io.Reader, bound futureBound) ([]commitlayer.Fact, error) {
	var in struct {
		Facts []factIn `json:"facts"`
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
	}
	switch {
	case in.Facts == nil:
		return nil, bad("facts: is required (an array of facts)")
	case len(in.Facts) == 0:
		return nil, bad("facts: at least one fact is required")
	}
	facts := make([]commitlayer.Fact, len(in.Facts))
	for i := range in.Facts {
		var err error
		if facts[i], err = in.Facts[i].fact(bound); err != nil {
			return nil, bad("facts[%d].%s", i, err.Error())
		}
	}
	return facts, nil
}

// futureBound is the latest time accepted: the server's clock plus the
// allowed skew. The zero bound accepts any time.
type futureBound struct {
	Latest time.Time
	Skew   time.Duration
}

func (s *Server) bound() futureBound {
	return futureBound{Latest: s.now().UTC().Add(s.maxFutureSkew), Skew: s.maxFutureSkew}
}

// check refuses a time before minTime or after the bound.
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

// fact converts and validates; its errors read "field: reason".
func (in *factIn) fact(bound futureBound) (commitlayer.Fact, error) {
	f := commitlayer.Fact{Source: in.Source, Type: in.Type, Subject: in.Subject, ExternalID: in.ExternalID, Attrs: in.Attrs}
	for _, s := range []struct{ field, v string }{
		{"source", in.Source}, {"type", in.Type}, {"subject", string(in.Subject)}, {"external_id", in.ExternalID},
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
	if f.Attrs == nil {
		f.Attrs = commitlayer.Attrs{}
	}
	if at, ok := nulAt(map[string]any(f.Attrs)); ok {
		return f, fmt.Errorf("attrs%s: contains a NUL character", at)
	}
	for i, l := range in.Links {
		if strings.IndexByte(string(l), 0) >= 0 {
			return f, fmt.Errorf("links[%d]: contains a NUL character", i)
		}
	}
	if len(in.Links) > 0 {
		f.Links = in.Links
	}
	return f, f.Validate()
}
