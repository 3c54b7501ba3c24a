package contracts

import (
	"cmp"
	"errors"
	"strconv"
)

// Error is one problem in a contract: which contract, which field (a path
// such as "effects[1].expect"), on which line of the source, and why.
type Error struct {
	Contract string // the contract id, "" when it could not be read
	Field    string // a field path; "yaml" for syntax errors
	Line     int    // 1-based; 0 when unknown
	Reason   string
}

// Error reads "contract refund_customer: effects[1].expect (line 23): <reason>".
func (e *Error) Error() string {
	where := e.Field
	if e.Line > 0 {
		where += " (line " + strconv.Itoa(e.Line) + ")"
	}
	return "contract " + cmp.Or(e.Contract, "(no id)") + ": " + where + ": " + e.Reason
}

// Errors returns the *Error values inside err (one, or each of a joined
// list), in order; another error becomes an *Error with only a Reason.
func Errors(err error) []*Error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*Error
		for _, e := range j.Unwrap() {
			out = append(out, Errors(e)...)
		}
		return out
	}
	var ce *Error
	if errors.As(err, &ce) {
		return []*Error{ce}
	}
	return []*Error{{Reason: err.Error()}}
}
