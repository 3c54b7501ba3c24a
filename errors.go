package commitlayer

import (
	"errors"
	"fmt"
)

// Error kinds. Stores and services wrap them; only the API's edge maps
// them to HTTP statuses.
var (
	// ErrNotFound: the record does not exist (for the tenant).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a write collides with an existing record (an
	// idempotency key reused with another body).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the input cannot be accepted; none of the call's writes is kept.
	ErrInvalid = errors.New("invalid input")
	// ErrUnavailable: a dependency (the database) cannot be reached now;
	// the same call may succeed later (503 with Retry-After).
	ErrUnavailable = errors.New("unavailable")
)

// Error is an error meant for the caller: a kind (an Err value), a stable
// wire code ("unknown_contract") and a message that may be shown as it is.
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
