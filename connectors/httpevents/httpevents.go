// Package httpevents pulls an http_events feed: GET {base}/events?after=&limit=
// answering {"events":[…],"next":seq,"more":bool}. Each event becomes a
// commitlayer.Fact whose source is the feed's name and whose external id is
// the event's id. The sandbox systems speak this format, and so can any
// customer feed.
package httpevents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/netguard"
)

var (
	// ErrUnreachable means the feed could not be reached.
	ErrUnreachable = errors.New("http_events feed unreachable")
	// ErrBadResponse means the feed answered, but not with a valid page. It
	// wraps netguard.ErrBadResponse, so netguard.Classify says "bad response".
	ErrBadResponse error = &kindError{"http_events feed gave a bad response", netguard.ErrBadResponse}
)

// kindError is a sentinel with its own text that also is a more general one.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// StatusError is a non-2xx answer from a feed. errors.Is(err,
// ErrBadResponse) holds for it.
type StatusError struct {
	StatusCode int
	// Code and Message are from a {"error":{"code","message"}} body, when
	// the feed sent one.
	Code    string
	Message string
}

func (e *StatusError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("http_events feed answered %d %s: %s", e.StatusCode, e.Code, e.Message)
	}
	return fmt.Sprintf("http_events feed answered %d", e.StatusCode)
}

// HTTPStatus is the status, for netguard.Classify ("http 503").
func (e *StatusError) HTTPStatus() int { return e.StatusCode }

// Is makes errors.Is(err, ErrBadResponse) hold.
func (e *StatusError) Is(target error) bool { return target == ErrBadResponse }

// Limits.
const (
	// DefaultLimit is the page size asked for when none is given.
	DefaultLimit = 500
	// MaxLimit is the largest page size asked for.
	MaxLimit = 5000
	// MaxPageBytes bounds a page's body.
	MaxPageBytes = 32 << 20
	// DefaultTimeout is the timeout of the client used when Client.HTTP is nil.
	DefaultTimeout = 10 * time.Second
)

var defaultHTTP = &http.Client{Timeout: DefaultTimeout}

// Client pulls one feed.
type Client struct {
	// HTTP does the requests; nil means a client with DefaultTimeout. Give it
	// a timeout: a feed that hangs is unreachable, not slow.
	HTTP *http.Client
	// BaseURL is the feed's base: events are at BaseURL + "/events".
	BaseURL string
}

// Page is one page of a feed, as facts.
type Page struct {
	Facts []commitlayer.Fact
	// Next is the cursor for the following page (the last seq read, or the
	// after given when the page is empty).
	Next int64
	// More is true when the feed has events after Next.
	More bool
}

// Pull reads the events after the cursor after, at most limit of them
// (DefaultLimit when limit ≤ 0, MaxLimit at most), as facts of source.
func (c *Client) Pull(ctx context.Context, source string, after int64, limit int) (Page, error) {
	if after < 0 {
		return Page{}, fmt.Errorf("pull %s: cursor %d is negative", source, after)
	}
	if !commitlayer.ValidName(source) {
		return Page{}, fmt.Errorf("pull %q: %w", source, errSourceName)
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	u, err := url.Parse(strings.TrimRight(c.BaseURL, "/") + "/events")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Page{}, fmt.Errorf("pull %s: base URL %q is not an http(s) URL", source, c.BaseURL)
	}
	q := u.Query()
	q.Set("after", strconv.FormatInt(after, 10))
	q.Set("limit", strconv.Itoa(limit))
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Page{}, fmt.Errorf("pull %s: %w", source, err)
	}
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Page{}, fmt.Errorf("pull %s from %s: %w: %w", source, c.BaseURL, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageBytes+1))
	if err != nil {
		// The connection broke mid-answer: as good as unreachable.
		return Page{}, fmt.Errorf("pull %s from %s: read body: %w: %w", source, c.BaseURL, ErrUnreachable, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{StatusCode: resp.StatusCode}
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &eb) == nil {
			se.Code, se.Message = eb.Error.Code, eb.Error.Message
		}
		return Page{}, fmt.Errorf("pull %s from %s: %w", source, c.BaseURL, se)
	}
	if len(body) > MaxPageBytes {
		return Page{}, fmt.Errorf("pull %s from %s: %w: page is larger than %d bytes", source, c.BaseURL, ErrBadResponse, MaxPageBytes)
	}
	p, err := DecodePage(source, body, after, limit)
	if err != nil {
		return Page{}, fmt.Errorf("pull %s from %s: %w", source, c.BaseURL, err)
	}
	return p, nil
}

// wireEvent is an event as the feed sends it; pointers tell a missing field
// from a zero one.
type wireEvent struct {
	ID         *string           `json:"id"`
	Seq        *int64            `json:"seq"`
	Type       *string           `json:"type"`
	Subject    *string           `json:"subject"`
	OccurredAt *string           `json:"occurred_at"`
	Attrs      json.RawMessage   `json:"attrs"`
	Links      []json.RawMessage `json:"links"`
}

// DecodePage decodes and validates one page of a feed read with cursor after
// and page size limit. Errors wrap ErrBadResponse and name the event index
// and field.
func DecodePage(source string, body []byte, after int64, limit int) (Page, error) {
	bad := func(format string, args ...any) (Page, error) {
		return Page{}, fmt.Errorf("%w: %s", ErrBadResponse, fmt.Sprintf(format, args...))
	}
	if !commitlayer.ValidName(source) {
		return Page{}, errSourceName
	}
	var raw struct {
		Events *[]json.RawMessage `json:"events"`
		Next   json.RawMessage    `json:"next"`
		More   *bool              `json:"more"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return bad("page is not a JSON object with events and next: %v", err)
	}
	if dec.More() {
		return bad("data after the page object")
	}
	if raw.Events == nil {
		return bad("events is missing")
	}
	if raw.Next == nil || string(raw.Next) == "null" {
		return bad("next is missing")
	}
	next, err := strconv.ParseInt(string(raw.Next), 10, 64)
	if err != nil || next < 0 {
		return bad("next must be a non-negative integer, got %.40s", raw.Next)
	}
	if next < after {
		return bad("next %d is before the cursor %d", next, after)
	}
	if limit > 0 && len(*raw.Events) > limit {
		return bad("page has %d events, more than the limit %d", len(*raw.Events), limit)
	}
	p := Page{Facts: make([]commitlayer.Fact, 0, len(*raw.Events)), Next: next}
	lastSeq := after
	seen := make(map[string]bool, len(*raw.Events))
	for i, rawEv := range *raw.Events {
		f, seq, err := decodeEvent(source, rawEv)
		if err != nil {
			return bad("events[%d]%s", i, err.Error())
		}
		if seq != nil {
			if *seq <= lastSeq {
				return bad("events[%d].seq: %d is not after %d", i, *seq, lastSeq)
			}
			lastSeq = *seq
		}
		if seen[f.ExternalID] {
			return bad("events[%d].id: %q appears twice in the page", i, f.ExternalID)
		}
		seen[f.ExternalID] = true
		p.Facts = append(p.Facts, f)
	}
	if next < lastSeq {
		return bad("next %d is before the last event's seq %d", next, lastSeq)
	}
	if len(p.Facts) > 0 && next == after {
		return bad("next %d did not advance past the cursor though the page has events", next)
	}
	if raw.More != nil {
		p.More = *raw.More
	} else {
		p.More = limit > 0 && len(p.Facts) == limit
	}
	return p, nil
}

// errSourceName refuses a source name a fact could not carry.
var errSourceName = errors.New("source name may only hold letters, digits, '_', '-' and '.'")

// decodeEvent turns one event into a fact; its errors start with ".field".
func decodeEvent(source string, raw json.RawMessage) (commitlayer.Fact, *int64, error) {
	var ev wireEvent
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&ev); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return commitlayer.Fact{}, nil, fmt.Errorf(".%s: wrong type (%s)", te.Field, te.Value)
		}
		return commitlayer.Fact{}, nil, fmt.Errorf(": not a JSON object: %v", err)
	}
	switch {
	case ev.ID == nil || *ev.ID == "":
		return commitlayer.Fact{}, nil, errors.New(".id: is required")
	case ev.Type == nil || *ev.Type == "":
		return commitlayer.Fact{}, nil, errors.New(".type: is required")
	case ev.Subject == nil:
		return commitlayer.Fact{}, nil, errors.New(".subject: is required")
	case ev.OccurredAt == nil:
		return commitlayer.Fact{}, nil, errors.New(".occurred_at: is required")
	}
	at, err := time.Parse(time.RFC3339Nano, *ev.OccurredAt)
	if err != nil {
		return commitlayer.Fact{}, nil, fmt.Errorf(".occurred_at: %q is not RFC 3339", *ev.OccurredAt)
	}
	f := commitlayer.Fact{
		Source:     source,
		Type:       *ev.Type,
		Subject:    commitlayer.Subject(*ev.Subject),
		ExternalID: *ev.ID,
		OccurredAt: at.UTC(),
	}
	if t := bytes.TrimSpace(ev.Attrs); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if t[0] != '{' {
			return commitlayer.Fact{}, nil, errors.New(".attrs: must be an object")
		}
		if err := json.Unmarshal(t, &f.Attrs); err != nil {
			return commitlayer.Fact{}, nil, fmt.Errorf(".attrs: %v", err)
		}
	}
	if f.Attrs == nil {
		f.Attrs = commitlayer.Attrs{}
	}
	for j, l := range ev.Links {
		var s string
		if err := json.Unmarshal(l, &s); err != nil {
			return commitlayer.Fact{}, nil, fmt.Errorf(".links[%d]: must be a string", j)
		}
		f.Links = append(f.Links, commitlayer.Subject(s))
	}
	if err := f.Validate(); err != nil {
		return commitlayer.Fact{}, nil, fmt.Errorf(".%w", err)
	}
	return f, ev.Seq, nil
}
