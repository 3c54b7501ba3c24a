package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Attempt is one more attempt of a recorded action's call: an agent's
// retry (ToolCalls says which calls are).
type Attempt struct {
	Claim commitlayer.Claim `json:"claim"`
	// Trace is the attempt's entry in the action's trace: a JSON object.
	Trace json.RawMessage `json:"trace,omitempty"`
	// At is when the attempt began (zero: now): the claim is the one of
	// the latest attempt.
	At time.Time `json:"at,omitzero"`
}

// Bounds of an attempt.
const (
	maxAttemptKey   = 255
	maxAttemptTrace = 4096
)

// RecordAttempt records attempt of action actionID's call under key (the
// attempt's own idempotency key): the action's claim becomes the
// attempt's, the attempt joins its trace. The same key with the same
// attempt returns the action again (created false); with another attempt,
// or for another action, it is ErrConflict; an unknown action ErrNotFound.
// The verification is not re-run here: the caller rechecks it, so that
// its next verdict covers the attempt.
func (s *Actions) RecordAttempt(ctx context.Context, tenantID, actionID, key string, a Attempt) (commitlayer.ActionRecord, bool, error) {
	bad := func(format string, args ...any) (commitlayer.ActionRecord, bool, error) {
		return commitlayer.ActionRecord{}, false, commitlayer.Errorf(commitlayer.ErrInvalid, "invalid_request", format, args...)
	}
	switch {
	case key == "" || len(key) > maxAttemptKey || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return bad("Idempotency-Key: an attempt needs one, at most %d printable characters", maxAttemptKey)
	case !slices.Contains(commitlayer.ClaimStatuses, a.Claim.Status):
		return bad("claim.status: %q is not one of %s", commitlayer.Clip(a.Claim.Status, 64), strings.Join(commitlayer.ClaimStatuses, ", "))
	case len(a.Trace) > maxAttemptTrace:
		return bad("trace: at most %d bytes", maxAttemptTrace)
	case strings.ContainsRune(a.Claim.Status+a.Claim.Message, 0):
		return bad("claim: must not hold a NUL character")
	}
	entry := bytes.TrimSpace(a.Trace)
	if len(entry) == 0 {
		entry = []byte("{}")
	}
	var obj map[string]any
	if json.Unmarshal(entry, &obj) != nil || obj == nil {
		return bad("trace: an attempt's trace is one JSON object")
	}
	canon, err := json.Marshal(struct {
		Claim commitlayer.Claim `json:"claim"`
		Trace map[string]any    `json:"trace"`
	}{a.Claim, obj})
	if err != nil {
		return bad("trace: %v", err)
	}
	if a.At.IsZero() {
		a.At = s.now().UTC()
	}
	sum := sha256.Sum256(canon)
	rec, created, err := s.store.RecordAttempt(ctx, tenantID, actionID, key, a.Claim, entry, a.At, sum[:])
	if err != nil {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("record attempt: %w", err)
	}
	return rec, created, nil
}

// RecheckAfter re-runs the verification of an action an attempt was just
// recorded on, so that its next verdict covers the attempt. With w.On it
// returns that pass's verdict when it is at the stage asked, within
// w.Timeout; nil otherwise, and whenever the verification cannot be re-run
// now (not started yet: its first pass reads the attempt; Temporal away;
// its watch over).
func (s *Actions) RecheckAfter(ctx context.Context, tenantID string, rec commitlayer.ActionRecord, w Wait) *commitlayer.Verdict {
	if s.verifier == nil || !rec.VerificationFailedAt.IsZero() || s.away() {
		return nil
	}
	timeout := recheckTimeout
	if w.On {
		timeout = w.Timeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	v, err := s.verifier.Recheck(ctx, tenantID, rec.ID)
	if err != nil {
		s.logger.DebugContext(ctx, "recheck after an attempt", "tenant", tenantID, "action", rec.ID, "error", err)
		if errors.Is(err, commitlayer.ErrUnavailable) {
			s.awayUntil.Store(s.now().Add(awayFor).UnixNano())
		}
		return nil
	}
	switch {
	case !w.On:
		return nil
	case w.reached(v):
		return &v
	}
	if v, reached, err := s.verifier.Wait(ctx, tenantID, rec, true); err == nil && reached {
		return &v
	}
	return nil
}

// recheckTimeout bounds a recheck no caller waits for.
const recheckTimeout = time.Minute

// RecheckLater is RecheckAfter for each of recs, after the caller answered
// (an OTLP export's retried calls); skipped when the background is full: the
// verification's next pass reads the attempts anyway.
func (s *Actions) RecheckLater(ctx context.Context, tenantID string, recs []commitlayer.ActionRecord) {
	if len(recs) > 0 && !s.later(ctx, func(ctx context.Context) {
		for _, rec := range recs {
			s.RecheckAfter(ctx, tenantID, rec, Wait{})
		}
	}) {
		s.logger.WarnContext(ctx, "rechecks after attempts left to the verifications' next passes", "tenant", tenantID, "actions", len(recs))
	}
}
