// Package stripeapi builds stripe-go v79 clients the way CommitLayer uses
// them: one backend per client (never the package-level globals), the
// network retries off (a caller that retries does so itself, where it can
// be measured), stripe-go's own logging and telemetry off, and a transport
// that can leave out the Idempotency-Key stripe-go adds to every POST.
package stripeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	stripe "github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"
)

// DefaultBaseURL is Stripe's API address.
const DefaultBaseURL = stripe.APIURL

// DefaultTimeout bounds one request when no HTTP client is given.
const DefaultTimeout = 30 * time.Second

// Config is what a client needs. Key is never logged or put in an error.
type Config struct {
	Key string
	// BaseURL is the API address; "" means api.stripe.com. Tests point it at
	// sandbox/stripefake or stripe-mock.
	BaseURL string
	// HTTP does the requests; nil means a client with DefaultTimeout. Its
	// transport is wrapped (see WithoutIdempotencyKey), not replaced.
	HTTP *http.Client
}

// New returns a stripe-go client for cfg. It checks only that BaseURL is an
// http(s) URL; key rules are the caller's (they differ between the sandbox
// backend and the connector).
func New(cfg Config) (*client.API, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("stripe client: base URL %q is not an http(s) URL", base)
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	wrapped := *hc
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	wrapped.Transport = &transport{next: rt}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(strings.TrimRight(base, "/")),
		HTTPClient:        &wrapped,
		MaxNetworkRetries: stripe.Int64(0),
		EnableTelemetry:   stripe.Bool(false),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return client.New(cfg.Key, &stripe.Backends{API: backend, Connect: backend, Uploads: backend}), nil
}

type noKeyMarker struct{}

// WithoutIdempotencyKey marks ctx so that a POST made with it (through a
// client from New, with the ctx set as the params' Context) goes out with
// no Idempotency-Key header.
//
// Why a transport: stripe-go v79 adds "Idempotency-Key: <random uuid>" to
// every POST whose params carry no key (BackendImplementation.NewRequest),
// and offers no switch to stop it; setting the header to "" through
// params.Headers would still send an empty header. Real Stripe then treats
// the caller's retry as a new request only when no key is sent, and that
// is the behaviour being measured: an agent that retries without a key
// must be able to refund twice. So the transport removes the header, and
// only on requests whose context carries this mark; every other request
// keeps stripe-go's key.
func WithoutIdempotencyKey(ctx context.Context) context.Context {
	return context.WithValue(ctx, noKeyMarker{}, true)
}

type transport struct{ next http.RoundTripper }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strip, _ := r.Context().Value(noKeyMarker{}).(bool); strip && r.Header.Get("Idempotency-Key") != "" {
		r = r.Clone(r.Context())
		r.Header.Del("Idempotency-Key")
	}
	return t.next.RoundTrip(r)
}

// AsError returns the *stripe.Error in err's chain, or nil.
func AsError(err error) *stripe.Error {
	var se *stripe.Error
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// Describe gives a short description of an error from stripe-go that is
// safe to log or return: status, type, code and param, and Stripe's message
// only for request errors that cannot name a key (authentication messages
// are left out, since Stripe echoes part of the key in them).
func Describe(err error) string {
	se := AsError(err)
	if se == nil {
		return "stripe request failed: " + redactURLErr(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "stripe answered %d", se.HTTPStatusCode)
	if se.Type != "" {
		fmt.Fprintf(&b, " %s", se.Type)
	}
	if se.Code != "" {
		fmt.Fprintf(&b, " %s", se.Code)
	}
	if se.Param != "" {
		fmt.Fprintf(&b, " (param %s)", se.Param)
	}
	if se.HTTPStatusCode != http.StatusUnauthorized && se.HTTPStatusCode != http.StatusForbidden && se.Msg != "" {
		fmt.Fprintf(&b, ": %s", se.Msg)
	}
	return b.String()
}

// redactURLErr describes a transport error. Keys travel in headers, never
// in URLs, so the error text is safe; it is still cut short.
func redactURLErr(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
