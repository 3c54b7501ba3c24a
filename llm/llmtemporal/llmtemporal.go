// Package llmtemporal runs a model turn inside a Temporal activity: the
// provider's *llm.Error becomes an application error Temporal retries when
// the failure is retryable (429, 5xx, timeouts, connection errors; after
// the wait a 429 asked for) and does not when it is not (400, a bad key,
// malformed output, a spent budget).
package llmtemporal

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer/llm"
)

// ErrorType is the application error type of a failed turn: "llm." and the
// llm.ErrorKind ("llm.rate_limited", "llm.auth", …).
func ErrorType(k llm.ErrorKind) string { return "llm." + string(k) }

// Turn makes one model turn; call it from an activity.
func Turn(ctx context.Context, p llm.Provider, req llm.Request) (llm.Response, error) {
	resp, err := p.Complete(ctx, req)
	if err != nil {
		return llm.Response{}, ApplicationError(err)
	}
	return resp, nil
}

// ApplicationError converts an *llm.Error for Temporal; any other error is
// returned as it is (Temporal retries it under the activity's policy).
// The message is the *llm.Error's, which never holds a key.
func ApplicationError(err error) error {
	e, ok := llm.AsError(err)
	if !ok {
		return err
	}
	opts := temporal.ApplicationErrorOptions{NonRetryable: !e.Retryable(), Details: []any{errorDetails{
		Provider: e.Provider, Kind: string(e.Kind), Status: e.Status}}}
	if e.Retryable() && e.RetryAfter > 0 {
		opts.NextRetryDelay = e.RetryAfter
	}
	return temporal.NewApplicationErrorWithOptions(e.Error(), ErrorType(e.Kind), opts)
}

// errorDetails travels with the application error.
type errorDetails struct {
	Provider string `json:"provider"`
	Kind     string `json:"kind"`
	Status   int    `json:"status,omitempty"`
}

// KindOf reads the llm.ErrorKind back from an error a turn activity returned to
// the workflow ("" when it is not one).
func KindOf(err error) llm.ErrorKind {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		if t := ae.Type(); len(t) > 4 && t[:4] == "llm." {
			return llm.ErrorKind(t[4:])
		}
	}
	if e, ok := llm.AsError(err); ok {
		return e.Kind
	}
	return ""
}

// RetryPolicy is a retry policy for turn activities: retryable kinds back
// off from 2 s to a minute, five attempts; the non-retryable kinds are
// marked on each error, and listed here too.
func RetryPolicy() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    2 * time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    5,
		NonRetryableErrorTypes: []string{ErrorType(llm.KindBadRequest), ErrorType(llm.KindAuth),
			ErrorType(llm.KindMalformed), ErrorType(llm.KindLimit), ErrorType(llm.KindConfig)},
	}
}
