package verify

import (
	"context"
	"errors"
	"fmt"
	"net"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/commitlayer/commitlayer"
)

// fault says what a failed call to Temporal means for the work that made
// it.
type fault int

const (
	// faultOther: unknown; this one call is retried later on its own.
	faultOther fault = iota
	// faultAway: Temporal does not answer (unavailable, a deadline, a
	// connection that fails) or cannot serve anyone now (busy, namespace
	// missing): retrying is right, for every call alike.
	faultAway
	// faultBad: Temporal refused this very request for its content (a
	// search attribute too large, an ID too long): no retry can fix it.
	faultBad
)

// classify tells "Temporal away" from "this request is bad".
func classify(err error) fault {
	var (
		invalid   *serviceerror.InvalidArgument
		unavail   *serviceerror.Unavailable
		deadline  *serviceerror.DeadlineExceeded
		exhausted *serviceerror.ResourceExhausted
		nsMissing *serviceerror.NamespaceNotFound
		canceled  *serviceerror.Canceled
		netErr    net.Error
	)
	switch {
	case err == nil:
		return faultOther
	case errors.As(err, &invalid):
		return faultBad
	case errors.As(err, &unavail), errors.As(err, &deadline), errors.As(err, &exhausted),
		errors.As(err, &nsMissing), errors.As(err, &canceled),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.As(err, &netErr):
		return faultAway
	}
	switch status.Code(errors.Unwrap(err)) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Canceled:
		return faultAway
	case codes.InvalidArgument:
		return faultBad
	}
	return faultOther
}

// StartRefusedError is a start Temporal refused for good: the action's
// values cannot make a workflow (an agent longer than a search attribute
// may be, say). the service marks such an action's verification failed;
// Reason is safe to show its tenant.
type StartRefusedError struct {
	ActionID string
	Reason   string
	Err      error
}

func (e *StartRefusedError) Error() string {
	return fmt.Sprintf("start verification of %s: refused: %s", e.ActionID, e.Reason)
}

func (e *StartRefusedError) Unwrap() error { return e.Err }

// StartRefused returns the reason shown to the tenant (the API looks for
// this method, not the type).
func (e *StartRefusedError) StartRefused() string { return e.Reason }

// refusedReason is the tenant's view of a refused start: Temporal's message
// (which names the field and the limit, never an address), bounded.
func refusedReason(err error) string {
	var invalid *serviceerror.InvalidArgument
	msg := err.Error()
	if errors.As(err, &invalid) {
		msg = invalid.Message
	}
	return "Temporal refused the verification's start: " + commitlayer.Clip(msg, 300)
}

// AwayError marks a call that failed because Temporal is away (the API
// answers 503 with Retry-After): errors.Is(err, commitlayer.ErrUnavailable)
// holds.
type AwayError struct{ Err error }

func (e *AwayError) Error() string { return "temporal unavailable: " + e.Err.Error() }
func (e *AwayError) Unwrap() []error {
	return []error{commitlayer.ErrUnavailable, e.Err}
}
