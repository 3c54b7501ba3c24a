// Package chaos injects failures between a client (the agent, or the
// extractor) and the sandbox systems. A Transport wraps another
// http.RoundTripper; rules armed on it pick calls by system, method and route
// pattern and call index, and each rule's Mode says precisely what the caller
// sees and what reaches the system.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Mode is what a rule does to the calls it targets.
type Mode string

const (
	// LostResponse forwards the call (the write commits) and then returns a
	// timeout to the caller: a net.Error whose Timeout() is true.
	LostResponse Mode = "lost_response"
	// PhantomSuccess forwards nothing and answers 200 with a body shaped
	// like the real response.
	PhantomSuccess Mode = "phantom_success"
	// Error forwards nothing and answers Rule.Status (403, 429 or 500) with a
	// JSON error body.
	Error Mode = "error"
	// Unreachable forwards nothing and fails like a refused connection.
	Unreachable Mode = "unreachable"
	// StaleRead forwards a feed read and cuts the answer to the events with
	// seq ≤ the feed's head when the rule was armed.
	StaleRead Mode = "stale_read"
	// Before runs Rule.Actor immediately before forwarding the call.
	Before Mode = "before"
	// Rewrite forwards the call and passes the response body through
	// Rule.Transform.
	Rewrite Mode = "rewrite"
)

// Modes lists every mode.
var Modes = []Mode{LostResponse, PhantomSuccess, Error, Unreachable, StaleRead, Before, Rewrite}

// Rule targets calls and says what to do with them.
type Rule struct {
	// Name labels the rule in the log; defaults to "mode system route".
	Name string
	// System is the first path segment ("payments"); empty matches any.
	System string
	// Route is "METHOD /path/pattern" where a "{name}" segment matches any
	// one segment, e.g. "POST /payments/refunds" or
	// "GET /tickets/tickets/{id}". Empty matches any call to System; for
	// StaleRead it defaults to "GET /{System}/events".
	Route string
	// Call is the 1-based index of the matching call the rule fires on;
	// 0 fires on every matching call.
	Call int
	Mode Mode
	// Status is the HTTP status for Error: 403, 429 or 500.
	Status int
	// Body, when set, is the PhantomSuccess response body instead of the
	// generated one.
	Body []byte
	// Actor is run by Before, e.g. a human refund through the operator. It
	// must not call through this Transport.
	Actor func(ctx context.Context) error
	// Transform rewrites the response body for Rewrite.
	Transform func(body []byte) ([]byte, error)

	method   string
	segments []string
	snapshot int64 // StaleRead: highest visible seq
	calls    int   // matching calls seen
	fired    int   // calls the rule acted on
}

// Entry records one call the transport saw.
type Entry struct {
	N      int    // 1-based order of the call through the transport
	Method string // HTTP method
	Path   string // URL path
	Rule   string // the rule that fired, "" when the call passed untouched
	Mode   Mode   // the mode applied, "" when none
	Call   int    // the rule's matching-call index
	Status int    // status the caller saw, 0 when it saw an error
	Note   string // what was done
	Err    string // the error the caller saw, or the actor's error
}

func (e Entry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", e.N, e.Method, e.Path)
	if e.Rule != "" {
		fmt.Fprintf(&b, " [%s call %d: %s]", e.Rule, e.Call, e.Note)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " -> %d", e.Status)
	}
	if e.Err != "" {
		fmt.Fprintf(&b, " err=%s", e.Err)
	}
	return b.String()
}

// Transport is an http.RoundTripper that applies armed rules. It is safe for
// concurrent use.
type Transport struct {
	inner http.RoundTripper
	base  string // base URL, for StaleRead snapshots and path prefixes
	// prefix is the path of base ("" for "http://host:port").
	prefix string

	// phantoms numbers the ids of this transport's PhantomSuccess answers.
	phantoms atomic.Int64

	mu    sync.Mutex
	rules []*Rule
	log   []Entry
	n     int
}

var _ http.RoundTripper = (*Transport)(nil)

// New wraps inner (http.DefaultTransport when nil). baseURL is the sandbox's
// base URL: request paths are matched after its path, and StaleRead rules
// read the feed head from it when armed.
func New(inner http.RoundTripper, baseURL string) *Transport {
	if inner == nil {
		inner = http.DefaultTransport
	}
	base := strings.TrimRight(baseURL, "/")
	prefix := ""
	if i := strings.Index(base, "://"); i >= 0 {
		if j := strings.IndexByte(base[i+3:], '/'); j >= 0 {
			prefix = base[i+3+j:]
		}
	}
	return &Transport{inner: inner, base: base, prefix: prefix}
}

// Arm validates r and adds it. Rules are tried in the order armed; the first
// rule whose call index matches fires. A StaleRead rule reads its system's
// feed head now, through the inner transport.
func (t *Transport) Arm(ctx context.Context, r Rule) error {
	if err := t.prepare(ctx, &r); err != nil {
		return fmt.Errorf("arm chaos rule %q: %w", r.Name, err)
	}
	t.mu.Lock()
	t.rules = append(t.rules, &r)
	t.mu.Unlock()
	return nil
}

// Disarm removes every rule; counts and the log are kept.
func (t *Transport) Disarm() {
	t.mu.Lock()
	t.rules = nil
	t.mu.Unlock()
}

func (t *Transport) prepare(ctx context.Context, r *Rule) error {
	if r.Mode == StaleRead && r.Route == "" && r.System != "" {
		r.Route = "GET /" + r.System + "/events"
	}
	if r.Name == "" {
		r.Name = strings.TrimSpace(fmt.Sprintf("%s %s %s", r.Mode, r.System, r.Route))
	}
	if r.Call < 0 {
		return fmt.Errorf("call index %d is negative", r.Call)
	}
	if r.Route != "" {
		method, path, ok := strings.Cut(r.Route, " ")
		path = strings.TrimSpace(path)
		if !ok || method == "" || method != strings.ToUpper(method) || !strings.HasPrefix(path, "/") {
			return fmt.Errorf("route %q is not \"METHOD /path\"", r.Route)
		}
		r.method = method
		r.segments = splitPath(path)
		if r.System != "" && (len(r.segments) == 0 || r.segments[0] != r.System) {
			return fmt.Errorf("route %q is not on system %q", r.Route, r.System)
		}
	}
	switch r.Mode {
	case LostResponse, PhantomSuccess, Unreachable:
	case Error:
		if r.Status != http.StatusForbidden && r.Status != http.StatusTooManyRequests &&
			r.Status != http.StatusInternalServerError {
			return fmt.Errorf("error status %d is not 403, 429 or 500", r.Status)
		}
	case Before:
		if r.Actor == nil {
			return errors.New("before needs an Actor")
		}
	case Rewrite:
		if r.Transform == nil {
			return errors.New("rewrite needs a Transform")
		}
	case StaleRead:
		if r.System == "" {
			return errors.New("stale_read needs a System")
		}
		head, err := t.head(ctx, r.System)
		if err != nil {
			return fmt.Errorf("snapshot %s feed: %w", r.System, err)
		}
		r.snapshot = head
	default:
		return fmt.Errorf("unknown mode %q", r.Mode)
	}
	return nil
}

// Calls returns how many calls have matched the named rule so far.
func (t *Transport) Calls(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.rules {
		if r.Name == name {
			return r.calls
		}
	}
	return 0
}

// Fired returns how many calls the named rule acted on.
func (t *Transport) Fired(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.rules {
		if r.Name == name {
			return r.fired
		}
	}
	return 0
}

// Log returns a copy of the entries recorded so far, in call order.
func (t *Transport) Log() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Entry(nil), t.log...)
}

// Snapshot returns the seq a StaleRead rule cuts at (0 for other rules).
func (t *Transport) Snapshot(name string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.rules {
		if r.Name == name {
			return r.snapshot
		}
	}
	return 0
}

// RoundTrip applies the first rule that fires on req, if any.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	segs := splitPath(strings.TrimPrefix(req.URL.Path, t.prefix))
	t.mu.Lock()
	t.n++
	entry := Entry{N: t.n, Method: req.Method, Path: req.URL.Path}
	var fire *Rule
	for _, r := range t.rules {
		if !r.matches(req.Method, segs) {
			continue
		}
		r.calls++
		if fire == nil && (r.Call == 0 || r.Call == r.calls) {
			fire = r
			r.fired++
			entry.Rule, entry.Mode, entry.Call = r.Name, r.Mode, r.calls
		}
	}
	var rule Rule
	if fire != nil {
		rule = *fire // the fields read below never change after Arm
	}
	t.mu.Unlock()

	resp, err := t.apply(req, fire != nil, &rule, &entry)
	if resp != nil {
		entry.Status = resp.StatusCode
	}
	if err != nil && entry.Err == "" {
		entry.Err = err.Error()
	}
	t.mu.Lock()
	t.log = append(t.log, entry)
	t.mu.Unlock()
	return resp, err
}

func (t *Transport) apply(req *http.Request, fired bool, r *Rule, e *Entry) (*http.Response, error) {
	if !fired {
		return t.inner.RoundTrip(req)
	}
	switch r.Mode {
	case LostResponse:
		resp, err := t.inner.RoundTrip(req)
		if err != nil {
			e.Note = "forwarded; the call failed on its own"
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		e.Note = fmt.Sprintf("forwarded (system answered %d); response dropped, timeout returned", resp.StatusCode)
		return nil, &timeoutError{op: req.Method + " " + req.URL.Path}

	case PhantomSuccess:
		body := r.Body
		if body == nil {
			body = t.phantom(req)
		} else {
			drainRequest(req)
		}
		e.Note = "not forwarded; 200 returned"
		return jsonResponse(req, http.StatusOK, body), nil

	case Error:
		drainRequest(req)
		e.Note = fmt.Sprintf("not forwarded; %d returned", r.Status)
		resp := jsonResponse(req, r.Status, errorBody(r.Status))
		if r.Status == http.StatusTooManyRequests {
			resp.Header.Set("Retry-After", "1")
		}
		return resp, nil

	case Unreachable:
		drainRequest(req)
		e.Note = "not forwarded; connection refused"
		return nil, refused(req.URL.Host)

	case Before:
		if err := r.Actor(req.Context()); err != nil {
			e.Err = "actor: " + err.Error()
			e.Note = "actor failed; forwarded"
		} else {
			e.Note = "actor ran; forwarded"
		}
		return t.inner.RoundTrip(req)

	case Rewrite:
		resp, err := t.inner.RoundTrip(req)
		if err != nil {
			e.Note = "forwarded; the call failed on its own"
			return nil, err
		}
		body, err := readBody(resp)
		if err != nil {
			return nil, fmt.Errorf("chaos rewrite: read response: %w", err)
		}
		out, err := r.Transform(body)
		if err != nil {
			e.Note = "forwarded; transform failed, body unchanged"
			e.Err = "transform: " + err.Error()
			out = body
		} else {
			e.Note = "forwarded; body rewritten"
		}
		setBody(resp, out)
		return resp, nil

	case StaleRead:
		resp, err := t.inner.RoundTrip(req)
		if err != nil {
			e.Note = "forwarded; the call failed on its own"
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			e.Note = "forwarded; non-200 left as is"
			return resp, nil
		}
		body, err := readBody(resp)
		if err != nil {
			return nil, fmt.Errorf("chaos stale read: read response: %w", err)
		}
		after, _ := strconv.ParseInt(req.URL.Query().Get("after"), 10, 64)
		out, hidden, err := CutFeed(body, r.snapshot, after)
		if err != nil {
			e.Note = "forwarded; feed not understood, body unchanged"
			e.Err = "cut: " + err.Error()
			out = body
		} else {
			e.Note = fmt.Sprintf("forwarded; %d events after seq %d hidden", hidden, r.snapshot)
		}
		setBody(resp, out)
		return resp, nil
	}
	return t.inner.RoundTrip(req)
}

func (r *Rule) matches(method string, segs []string) bool {
	if r.System != "" && (len(segs) == 0 || segs[0] != r.System) {
		return false
	}
	if r.segments == nil {
		return true
	}
	if method != r.method || len(segs) != len(r.segments) {
		return false
	}
	for i, p := range r.segments {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			continue
		}
		if p != segs[i] {
			return false
		}
	}
	return true
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return []string{}
	}
	return strings.Split(p, "/")
}
