package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/commitlayer/commitlayer"
)

// MaxActionBytes bounds an action as JSON (params, claim and trace
// included): what a POST /v1/actions body may hold.
const MaxActionBytes = 1 << 20

// EarliestTime is the earliest requested_at (or occurred_at) the store
// takes: the Unix epoch.
var EarliestTime = time.Unix(0, 0).UTC()

// CheckAction holds an action to the rules every action obeys, whatever
// door it comes in by (POST /v1/actions, a span on POST /v1/traces, a call
// through the MCP gateway): text PostgreSQL can keep (UTF-8, no NUL), a
// requested_at from the epoch to latest (zero: not bounded; a later one
// would have its verification sleep until then), a known claim status, each
// field's own bounds (Action.Validate) and at most MaxActionBytes as JSON.
// Errors read "field: reason".
func CheckAction(a commitlayer.Action, latest time.Time) error {
	for _, s := range []struct{ field, v string }{
		{"id", a.ID}, {"contract", a.Contract}, {"agent", a.Agent}, {"subject", string(a.Subject)},
		{"claim.status", a.Claim.Status}, {"claim.message", a.Claim.Message},
	} {
		if err := checkText(s.field, s.v); err != nil {
			return err
		}
	}
	if err := checkValue("params", map[string]any(a.Params)); err != nil {
		return err
	}
	if t := a.RequestedAt; t.Before(EarliestTime) {
		return fmt.Errorf("requested_at: must be %s or later", EarliestTime.Format(time.RFC3339))
	} else if !latest.IsZero() && t.After(latest) {
		return fmt.Errorf("requested_at: %s is later than %s, the server's clock plus the skew it allows",
			t.Format(time.RFC3339Nano), latest.UTC().Format(time.RFC3339Nano))
	}
	if a.Claim.Status != "" && !slices.Contains(commitlayer.ClaimStatuses, a.Claim.Status) {
		return fmt.Errorf("claim.status: %q is not one of %s (or empty: no claim)",
			commitlayer.Clip(a.Claim.Status, 64), strings.Join(commitlayer.ClaimStatuses, ", "))
	}
	if err := a.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("params: %w", errors.Unwrap(err))
	}
	if len(b) > MaxActionBytes {
		return fmt.Errorf("the action is %d bytes as JSON (params, claim and trace), more than the %d bytes of a POST /v1/actions body", len(b), MaxActionBytes)
	}
	return nil
}

// checkText refuses a NUL (PostgreSQL text cannot hold one) and text that
// is not UTF-8.
func checkText(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s: contains a NUL character", field)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s: is not UTF-8 text", field)
	}
	return nil
}

// checkValue checks the strings and keys of a decoded JSON value.
func checkValue(path string, v any) error {
	switch x := v.(type) {
	case string:
		return checkText(path, x)
	case map[string]any:
		for k, e := range x {
			if err := checkText(path+" key", k); err != nil {
				return err
			}
			if err := checkValue(path+"."+k, e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkValue(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}
