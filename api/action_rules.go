package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// actionRules are the rules every action obeys, whatever door it comes in
// by (POST /v1/actions, a span on POST /v1/traces): text PostgreSQL can
// keep (UTF-8, no NUL), a requested_at from the epoch to bound.Latest (a
// later one would have its verification sleep until then), a known claim
// status, each field's own bounds (Action.Validate: contract, agent,
// subject), and at most MaxBody bytes as JSON, the bound of a POST
// /v1/actions body (params and claim included). Errors read
// "field: reason".
func actionRules(a commitlayer.Action, bound futureBound) error {
	for _, s := range []struct{ field, v string }{
		{"id", a.ID}, {"contract", a.Contract}, {"agent", a.Agent}, {"subject", string(a.Subject)},
		{"claim.status", a.Claim.Status}, {"claim.message", a.Claim.Message},
	} {
		if err := noNUL(s.field, s.v); err != nil {
			return err
		}
	}
	if err := valueNoNUL("params", map[string]any(a.Params)); err != nil {
		return err
	}
	t := a.RequestedAt
	if t.Before(minTime) {
		return fmt.Errorf("requested_at: must be %s or later", minTime.Format(time.RFC3339))
	}
	if !bound.Latest.IsZero() && t.After(bound.Latest) {
		return fmt.Errorf("requested_at: %s is later than %s, the server's clock plus %s",
			t.Format(time.RFC3339Nano), bound.Latest.UTC().Format(time.RFC3339Nano), bound.Skew)
	}
	if a.Claim.Status != "" && !slices.Contains(commitlayer.ClaimStatuses, a.Claim.Status) {
		return fmt.Errorf("claim.status: %q is not one of %s (or empty: no claim)",
			truncate(a.Claim.Status, 64), strings.Join(commitlayer.ClaimStatuses, ", "))
	}
	if err := a.Validate(); err != nil {
		return err
	}
	var n byteCount
	enc := json.NewEncoder(&n)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return fmt.Errorf("params: %w", errors.Unwrap(err))
	}
	if n > MaxBody {
		return fmt.Errorf("the action is %d bytes as JSON (params, claim and trace), more than the %d bytes of a POST /v1/actions body", n, MaxBody)
	}
	return nil
}

// byteCount is an io.Writer that counts.
type byteCount int

func (n *byteCount) Write(p []byte) (int, error) { *n += byteCount(len(p)); return len(p), nil }
