package commitlayer

import (
	"errors"
	"fmt"
)

// Error kinds. Stores and services wrap them; the API maps them to HTTP
// statuses at its edge (404, 409, 400/422), and nothing else looks at the
// text.
var (
	// ErrNotFound: the record does not exist (for the tenant).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a write collides with an existing record, e.g. an
	// idempotency key reused with another body.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the input cannot be accepted: a field fails validation,
	// or the store rejects a value. Nothing of the call's writes is kept.
	ErrInvalid = errors.New("invalid input")
	// ErrUnavailable: a dependency (the database) cannot be reached now;
	// the same call may succeed later (the API answers 503 with
	// Retry-After).
	ErrUnavailable = errors.New("unavailable")
)

// Error is an error meant for the caller: a kind (one of the Err values),
// a stable code for the wire ("unknown_contract") and a message that may be
// shown as it is.
type Error struct {
	Kind    error
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrNotFound) and the like work.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf returns an *Error of kind with code and a formatted message.
func Errorf(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}
