// Package httpjson reads facts from an HTTP JSON API a company already has,
// read-only: kind "http_json". It sends GET requests only, finds the
// records and each record's fields with JSON Pointers (RFC 6901), and pages
// with the API's own cursor. Requests have a timeout, answers a size
// limit, and redirects are refused (they could lead anywhere).
package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Kind is the connector kind this package serves.
const Kind = "http_json"

// Limits and defaults.
const (
	DefaultTimeout  = 10 * time.Second
	MaxTimeout      = 60 * time.Second
	DefaultMaxBytes = 8 << 20
	MaxMaxBytes     = 32 << 20
	DefaultMaxPages = 100
)

var (
	// ErrUnreachable means the API could not be reached or timed out.
	ErrUnreachable = errors.New("http_json source unreachable")
	// ErrBadResponse means the API answered, but not with a page the
	// configuration can read.
	ErrBadResponse = errors.New("http_json source gave a bad response")
)

// StatusError is a non-2xx answer. errors.Is(err, ErrBadResponse) holds.
type StatusError struct{ StatusCode int }

func (e *StatusError) Error() string {
	return fmt.Sprintf("http_json source answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// Is makes errors.Is(err, ErrBadResponse) hold.
func (e *StatusError) Is(target error) bool { return target == ErrBadResponse }

// HTTPStatus is the status answered (netguard.Classify says "http 500").
func (e *StatusError) HTTPStatus() int { return e.StatusCode }

// Config is an http_json connector's configuration.
type Config struct {
	// URL is fetched with GET; the cursor is added as the query parameter
	// CursorParam (not on the first pull).
	URL string `json:"url"`
	// Headers are sent with each request (an Authorization header, say).
	// Their values are secrets: never in errors or logs.
	Headers map[string]string `json:"headers,omitempty"`
	// CursorParam names the cursor's query parameter; empty means "cursor".
	CursorParam string `json:"cursor_param,omitempty"`
	// Items points at the array of records in a page ("/data"); "" is the
	// page itself.
	Items string `json:"items"`
	// Next points at the cursor of the next page in a page
	// ("/next_cursor"); a missing, null or empty value means the last page.
	Next string `json:"next"`
	// HasMore, when set, points at a boolean saying whether more pages
	// follow.
	HasMore string `json:"has_more,omitempty"`
	// Type is the fact type of every record, or TypePointer points at it in
	// each record.
	Type        string `json:"type,omitempty"`
	TypePointer string `json:"type_pointer,omitempty"`
	// Subject points at the record's subject: an id when SubjectType is
	// set ("o_1001" → "order:o_1001"), else "type:id".
	Subject     string `json:"subject"`
	SubjectType string `json:"subject_type,omitempty"`
	// ExternalID points at the record's stable id (a string or integer).
	ExternalID string `json:"external_id"`
	// OccurredAt points at an RFC 3339 time or integer Unix seconds.
	OccurredAt string `json:"occurred_at"`
	// Attrs points at the object that becomes attrs; empty means the whole
	// record.
	Attrs string `json:"attrs,omitempty"`
	// Links maps a pointer to the subject type of its value; an empty type
	// means the value is a whole "type:id". Missing or null adds no link.
	Links map[string]string `json:"links,omitempty"`
	// Timeout bounds one request ("10s"); MaxBytes one answer; MaxPages the
	// pages of one pull (the rest is read by the next).
	Timeout  string `json:"timeout,omitempty"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
	MaxPages int    `json:"max_pages,omitempty"`
}

// compiled is a validated configuration.
type compiled struct {
	url                                               *url.URL
	items, next, hasMore, typ, subject, id, at, attrs Pointer
	hasHasMore, hasType                               bool
	typeName, subjectType                             string
	links                                             []link
	timeout                                           time.Duration
	maxBytes                                          int64
}

type link struct {
	p   Pointer
	typ string
}

// ParseConfig decodes and validates a configuration (JSON, unknown fields
// refused).
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("http_json connector config: %w", err)
	}
	if _, err := c.compile(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (c *Config) compile() (*compiled, error) {
	bad := func(field, format string, args ...any) error {
		return &commitlayer.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	out := &compiled{timeout: DefaultTimeout, maxBytes: DefaultMaxBytes}
	u, err := url.Parse(c.URL)
	if c.URL == "" {
		return nil, bad("url", "is required")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, bad("url", "is not an absolute http or https URL")
	}
	if u.User != nil {
		return nil, bad("url", "must not hold credentials; send them in headers")
	}
	out.url = u
	for name := range c.Headers {
		if name == "" || strings.ContainsAny(name, " :\r\n") {
			return nil, bad("headers", "%q is not a header name", name)
		}
		if strings.ContainsAny(c.Headers[name], "\r\n") {
			return nil, bad("headers", "the value of %s holds a line break", name)
		}
	}
	ptr := func(field, s string, dst *Pointer) error {
		p, err := ParsePointer(s)
		if err != nil {
			return bad(field, "%v", err)
		}
		*dst = p
		return nil
	}
	for _, f := range []struct {
		field, s string
		dst      *Pointer
		required bool
	}{
		{"items", c.Items, &out.items, false},
		{"next", c.Next, &out.next, true},
		{"has_more", c.HasMore, &out.hasMore, false},
		{"type_pointer", c.TypePointer, &out.typ, false},
		{"subject", c.Subject, &out.subject, true},
		{"external_id", c.ExternalID, &out.id, true},
		{"occurred_at", c.OccurredAt, &out.at, true},
		{"attrs", c.Attrs, &out.attrs, false},
	} {
		if f.required && f.s == "" {
			return nil, bad(f.field, "is required (a JSON pointer such as /id)")
		}
		if err := ptr(f.field, f.s, f.dst); err != nil {
			return nil, err
		}
	}
	out.hasHasMore = c.HasMore != ""
	switch {
	case c.Type == "" && c.TypePointer == "":
		return nil, bad("type", "type or type_pointer is required")
	case c.Type != "" && c.TypePointer != "":
		return nil, bad("type", "give type or type_pointer, not both")
	}
	out.hasType, out.typeName, out.subjectType = c.Type != "", c.Type, c.SubjectType
	if c.SubjectType != "" {
		if _, err := commitlayer.ParseSubject(c.SubjectType + ":x"); err != nil {
			return nil, bad("subject_type", "%q may only hold a-z, 0-9 and _", c.SubjectType)
		}
	}
	// In the pointers' order: a fact's links come out the same on every
	// pull (a map's order is random).
	for _, p := range slices.Sorted(maps.Keys(c.Links)) {
		var l link
		if err := ptr("links", p, &l.p); err != nil {
			return nil, err
		}
		l.typ = c.Links[p]
		out.links = append(out.links, l)
	}
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 || d > MaxTimeout {
			return nil, bad("timeout", "%q must be a duration above 0 and at most %s", c.Timeout, MaxTimeout)
		}
		out.timeout = d
	}
	if c.MaxBytes < 0 || c.MaxBytes > MaxMaxBytes {
		return nil, bad("max_bytes", "must be between 1 and %d (0: %d)", MaxMaxBytes, DefaultMaxBytes)
	} else if c.MaxBytes > 0 {
		out.maxBytes = c.MaxBytes
	}
	if c.MaxPages < 0 {
		return nil, bad("max_pages", "must not be negative")
	}
	return out, nil
}
