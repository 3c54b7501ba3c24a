package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrorKind classifies a failed turn.
type ErrorKind string

// Kinds. RateLimited, Server, Timeout and Connection are retryable; the rest
// are not.
const (
	KindRateLimited ErrorKind = "rate_limited" // 429
	KindServer      ErrorKind = "server"       // 5xx, overloaded
	KindTimeout     ErrorKind = "timeout"      // deadline exceeded before an answer
	KindConnection  ErrorKind = "connection"   // could not connect, connection reset
	KindBadRequest  ErrorKind = "bad_request"  // 400, 404, 422: the request is wrong
	KindAuth        ErrorKind = "auth"         // 401, 403, an invalid key
	KindMalformed   ErrorKind = "malformed"    // the model's output could not be used
	KindLimit       ErrorKind = "limit"        // max turns, max tokens or the budget
	KindConfig      ErrorKind = "config"       // no key, unknown provider
)

// Retryable reports whether trying the same turn again could help.
func (k ErrorKind) Retryable() bool {
	switch k {
	case KindRateLimited, KindServer, KindTimeout, KindConnection:
		return true
	}
	return false
}

// Error is a failed turn. Its message never holds an API key.
type Error struct {
	Provider string    `json:"provider"`
	Kind     ErrorKind `json:"kind"`
	// Status is the HTTP status, 0 when none came back.
	Status int `json:"status,omitempty"`
	// RetryAfter is the wait the provider asked for (Retry-After).
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	Message    string        `json:"message"`
}

func (e *Error) Error() string {
	s := e.Provider + ": " + string(e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Retryable reports whether trying the same turn again could help.
func (e *Error) Retryable() bool { return e.Kind.Retryable() }

// AsError returns the *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// KindForStatus classifies an HTTP status.
func KindForStatus(status int) ErrorKind {
	switch {
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status == http.StatusRequestTimeout:
		return KindTimeout
	case status >= 500:
		return KindServer
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	default:
		return KindBadRequest
	}
}

// Malformed builds the error for model output that cannot be used.
func Malformed(provider, format string, args ...any) *Error {
	return &Error{Provider: provider, Kind: KindMalformed, Message: fmt.Sprintf(format, args...)}
}

// secret scrubs one key from messages.
type secret string

// scrub replaces the key (and anything after "Bearer ") in s.
func (k secret) scrub(s string) string {
	if len(k) >= 4 {
		s = strings.ReplaceAll(s, string(k), "[redacted]")
	}
	return s
}

// transportError classifies an error that came with no HTTP answer: a
// context deadline or a transport timeout is KindTimeout, a JSON decoding
// error is KindMalformed, anything else KindConnection.
func transportError(provider string, key secret, err error) *Error {
	kind := KindConnection
	var ne net.Error
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = KindTimeout
	case errors.Is(err, context.Canceled):
		// The caller gave up (an activity cancelled): retrying is the
		// caller's decision, so keep it retryable as a timeout.
		kind = KindTimeout
	case errors.As(err, &se), errors.As(err, &te):
		kind = KindMalformed
	}
	return &Error{Provider: provider, Kind: kind, Message: key.scrub(err.Error())}
}

// retryAfter reads Retry-After (seconds or an HTTP date) and the
// retry-after-ms header some providers send.
func retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if n, err := strconv.ParseFloat(ms, 64); err == nil && n > 0 {
			return time.Duration(n * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// statusError builds the error for an HTTP answer that was not 2xx.
func statusError(provider string, key secret, status int, h http.Header, msg string) *Error {
	return &Error{Provider: provider, Kind: KindForStatus(status), Status: status,
		RetryAfter: retryAfter(h), Message: key.scrub(msg)}
}
