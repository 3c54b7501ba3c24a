// Package client is a Go client for the CommitLayer HTTP API: typed calls,
// one idempotency key per logical call reused on every retry, bounded
// retries with jittered backoff (honouring Retry-After), typed *APIError
// values, and WaitForVerdict to gate an agent's next step on a verdict.
package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// DefaultTimeout bounds one HTTP attempt when no http.Client is given;
// MaxResponseBytes bounds a response body.
const (
	DefaultTimeout   = 30 * time.Second
	MaxResponseBytes = 64 << 20
)

// RetryPolicy bounds the retries of one call.
type RetryPolicy struct {
	MaxAttempts int           // the first included (1: no retry); zero means 5
	BaseDelay   time.Duration // the first backoff, doubled each time; zero means 200 ms
	MaxDelay    time.Duration // caps a backoff and a Retry-After; zero means 10 s
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	p.MaxAttempts = cmp.Or(max(p.MaxAttempts, 0), 5)
	p.BaseDelay = cmp.Or(max(p.BaseDelay, 0), 200*time.Millisecond)
	p.MaxDelay = cmp.Or(max(p.MaxDelay, 0), 10*time.Second)
	return p
}

// backoff is the wait before attempt n+1 (n ≥ 1): a uniform random duration
// in [d/2, d] with d = min(MaxDelay, BaseDelay·2^(n-1)).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := min(float64(p.BaseDelay)*math.Pow(2, float64(n-1)), float64(p.MaxDelay))
	return time.Duration(d/2 + mrand.Float64()*d/2)
}

// Client calls one CommitLayer API with one key. It is safe for concurrent
// use. Build it with New.
type Client struct {
	base       *url.URL
	key        string
	http       *http.Client
	retry      RetryPolicy
	userAgent  string
	newKey     func() string
	sleep      func(ctx context.Context, d time.Duration) error
	serverWait bool
	poll       PollPolicy
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client; give it a Timeout (one attempt's bound).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithRetry sets the retry policy.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithIdempotencyKeys replaces the generator of idempotency keys (one per
// logical call), e.g. to derive them from the caller's step ids.
func WithIdempotencyKeys(gen func() string) Option { return func(c *Client) { c.newKey = gen } }

// WithPolling sets how WaitForVerdict polls.
func WithPolling(p PollPolicy) Option { return func(c *Client) { c.poll = p.withDefaults() } }

// WithServerWait makes WaitForVerdict ask the server to hold each GET until
// the verdict reaches the stage (?wait=); a server without that support
// answers at once and the client keeps polling.
func WithServerWait(on bool) Option { return func(c *Client) { c.serverWait = on } }

// New returns a client for the API at baseURL ("http://127.0.0.1:8080")
// with key (a tenant's, or the admin key), which never appears in errors.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q is not an absolute http or https URL", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q must not have a query or fragment", baseURL)
	}
	c := &Client{
		base:      u,
		key:       key,
		http:      &http.Client{Timeout: DefaultTimeout},
		retry:     RetryPolicy{}.withDefaults(),
		userAgent: "commitlayer-go-client/1",
		newKey:    NewIdempotencyKey,
		sleep:     sleepCtx,
		poll:      PollPolicy{}.withDefaults(),
	}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: DefaultTimeout}
	}
	return c, nil
}

// NewIdempotencyKey returns a random key (128 bits, hex).
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "cl-" + hex.EncodeToString(b[:])
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// APIError is an answer of the API outside 2xx.
type APIError struct {
	StatusCode int
	Code       string // {"error":{"code"}}: invalid_request, not_found, …
	Message    string
	Details    []ErrorDetail // the contract compiler's problems
	RequestID  string        // X-Request-Id, for the server's log
	RetryAfter time.Duration // zero when not sent
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("commitlayer: %d", e.StatusCode)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Temporary reports whether the same request may succeed later (429, 5xx).
func (e *APIError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// IsCode reports whether err is an *APIError with the given code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// IsNotFound reports whether err is a 404 from the API.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

// request is one logical call.
type request struct {
	method      string
	path        string // escaped path, from the API root
	query       url.Values
	body        any // sent as JSON, or as is when it is []byte
	contentType string
	// safe marks a call that can be repeated whatever an earlier attempt
	// did (GETs, POSTs the server de-duplicates). Others are retried only
	// when the server surely did not act: a 429 or no connection.
	safe           bool
	idempotencyKey string // sent on every attempt
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// do runs a call with retries and decodes a 2xx body into out (if not nil).
func (c *Client) do(ctx context.Context, r request, out any) (response, error) {
	op := r.method + " " + r.path
	var body []byte
	switch b := r.body.(type) {
	case nil:
	case []byte:
		body = b
	default:
		var err error
		if body, err = jsonBody(b); err != nil {
			return response{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	var last error
	for attempt := 1; ; attempt++ {
		res, err := c.once(ctx, r, body)
		if err == nil {
			if out != nil && len(res.body) > 0 {
				if err := jsonv2.Unmarshal(res.body, out); err != nil {
					return res, fmt.Errorf("%s: decode answer: %w", op, err)
				}
			}
			return res, nil
		}
		last = err
		wait, retry := c.retryable(r, err, attempt)
		if !retry || attempt >= c.retry.MaxAttempts || ctx.Err() != nil {
			break
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			break
		}
		if err := c.sleep(ctx, wait); err != nil {
			break
		}
	}
	var ae *APIError
	if errors.As(last, &ae) {
		return response{}, last
	}
	return response{}, fmt.Errorf("%s: %w", op, last)
}

// retryable says whether err of attempt n may be retried, and after how long.
func (c *Client) retryable(r request, err error, n int) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) {
		switch {
		case ae.StatusCode == http.StatusTooManyRequests:
		case ae.StatusCode >= 500 && r.safe:
		case ae.StatusCode == http.StatusServiceUnavailable && ae.RetryAfter > 0:
			// The server said when to come back: it did not act.
		default:
			return 0, false
		}
		if ae.RetryAfter > 0 {
			return min(ae.RetryAfter, c.retry.MaxDelay), true
		}
		return c.retry.backoff(n), true
	}
	if r.safe || notSent(err) {
		return c.retry.backoff(n), true
	}
	return 0, false
}

// notSent reports whether the connection was never made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (c *Client) once(ctx context.Context, r request, body []byte) (response, error) {
	u := c.base.String() + r.path // r.path is escaped
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return response{}, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return response{}, fmt.Errorf("read answer: %w", err)
	}
	if len(b) > MaxResponseBytes {
		return response{}, fmt.Errorf("answer is larger than %d bytes", MaxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return response{}, apiError(resp, b)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func apiError(resp *http.Response, body []byte) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var eb ErrorBody
	if jsonv2.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message, e.Details = eb.Error.Code, eb.Error.Message, eb.Error.Details
	} else {
		e.Message = http.StatusText(resp.StatusCode)
	}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date; zero when absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func jsonBody(v any) ([]byte, error) {
	b, err := jsonv2.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return b, nil
}
