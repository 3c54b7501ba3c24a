package sinks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Options are what every sink shares.
type Options struct {
	// APIKey is the platform's key (required).
	APIKey string
	// BaseURL is the API's root, e.g. https://api.braintrust.dev.
	BaseURL string
	// HTTPClient sends the requests; nil means one with RequestTimeout.
	HTTPClient *http.Client
	// RequestTimeout bounds one request (default 15 s) when HTTPClient is
	// nil.
	RequestTimeout time.Duration
	// Deadline bounds a whole Deliver (default 2 min).
	Deadline time.Duration
	// Retry is the retry policy (zero fields take the defaults).
	Retry Retry
	// BatchSize is the rows per batch request (default 50).
	BatchSize int
	// Logger logs retries and give-ups (default slog.Default()).
	Logger *slog.Logger
}

// Retry is a retry policy: up to Attempts tries, waiting a random time up
// to Base·2ⁿ (at most Max) between them.
type Retry struct {
	Attempts int
	Base     time.Duration
	Max      time.Duration
}

func (o Options) withDefaults() Options {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 15 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.RequestTimeout}
	}
	if o.Deadline <= 0 {
		o.Deadline = 2 * time.Minute
	}
	if o.Retry.Attempts <= 0 {
		o.Retry.Attempts = 5
	}
	if o.Retry.Base <= 0 {
		o.Retry.Base = 250 * time.Millisecond
	}
	if o.Retry.Max <= 0 {
		o.Retry.Max = 10 * time.Second
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 50
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// client sends JSON requests to one platform with retries.
type client struct {
	sink    string
	base    *url.URL
	key     string
	headers func(h http.Header)
	opts    Options
}

func newClient(sink string, o Options, defaultBase string, headers func(key string, h http.Header)) (*client, error) {
	o = o.withDefaults()
	if strings.TrimSpace(o.APIKey) == "" {
		return nil, fmt.Errorf("%s sink: no API key", sink)
	}
	raw := o.BaseURL
	if raw == "" {
		raw = defaultBase
	}
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%s sink: base URL %q is not an http(s) URL", sink, strings.ReplaceAll(raw, o.APIKey, "[redacted]"))
	}
	base.Path = strings.TrimRight(base.Path, "/")
	key := o.APIKey
	return &client{sink: sink, base: base, key: key, opts: o, headers: func(h http.Header) { headers(key, h) }}, nil
}

// statusError is a response that was not 2xx.
type statusError struct {
	op     string
	status int
	body   string
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("%s: HTTP %d", e.op, e.status)
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.op, e.status, e.body)
}

func retryable(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

// do sends body (JSON) to path with query and decodes a 2xx answer into out
// (when not nil). It retries 429, 5xx and network errors. The error it
// returns names op and never contains the key.
func (c *client) do(ctx context.Context, op, method, path string, query url.Values, body, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%s: encode: %w", op, err)
		}
	}
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = query.Encode()
	var last error
	attempt := 1
	for ; ; attempt++ {
		wait, err := c.once(ctx, op, method, u.String(), payload, out)
		if err == nil {
			return nil
		}
		last = err
		if wait < 0 || attempt >= c.opts.Retry.Attempts || ctx.Err() != nil {
			break
		}
		if wait == 0 {
			wait = c.backoff(attempt)
		}
		c.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "sink request failed, retrying", slog.String("sink", c.sink),
			slog.String("op", op), slog.Int("attempt", attempt), slog.Duration("wait", wait),
			slog.String("error", c.redact(err.Error())))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: gave up: %s (%w)", op, c.redact(last.Error()), ctx.Err())
		case <-t.C:
		}
	}
	if attempt > 1 {
		return fmt.Errorf("%s (%d attempts)", c.redact(last.Error()), attempt)
	}
	return errors.New(c.redact(last.Error()))
}

// once sends one request. wait is negative when the error must not be
// retried, positive when the server asked for a wait, 0 for the backoff.
func (c *client) once(ctx context.Context, op, method, u string, payload []byte, out any) (wait time.Duration, err error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "commitlayer-sinks")
	c.headers(req.Header)
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return 0, fmt.Errorf("%s: %s", op, netReason(err))
	}
	defer resp.Body.Close()
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &statusError{op: op, status: resp.StatusCode, body: snippet(data)}
		if !retryable(resp.StatusCode) {
			return -1, e
		}
		return c.retryAfter(resp.Header.Get("Retry-After")), e
	}
	if rerr != nil {
		return 0, fmt.Errorf("%s: read answer: %s", op, netReason(rerr))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return -1, fmt.Errorf("%s: answer is not the expected JSON: %w", op, err)
		}
	}
	return 0, nil
}

// netReason is a network error without the request's URL (whose query
// may say more than a report should).
func netReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

func (c *client) retryAfter(h string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || secs < 0 {
		return 0
	}
	return min(time.Duration(secs)*time.Second, c.opts.Retry.Max)
}

func (c *client) backoff(attempt int) time.Duration {
	d := c.opts.Retry.Base << min(attempt-1, 20)
	if d <= 0 || d > c.opts.Retry.Max {
		d = c.opts.Retry.Max
	}
	return d/2 + rand.N(d/2+1)
}

// redact removes the key from text a server or a transport produced.
func (c *client) redact(s string) string {
	if c.key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[redacted]")
}

// snippet is the start of an error answer, on one line.
func snippet(data []byte) string {
	s := strings.Join(strings.Fields(string(data)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// batches splits n items into [from, to) ranges of at most size.
func batches(n, size int) [][2]int {
	var out [][2]int
	for i := 0; i < n; i += size {
		out = append(out, [2]int{i, min(i+size, n)})
	}
	return out
}
