package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/service"
)

// postAttempt records one more attempt of an action's call (an agent's
// retry) under its own Idempotency-Key, then the verification re-reads; with
// ?wait= the verdict answered is of a pass begun after the attempt. The
// same key with another attempt or action is 409.
func (s *Server) postAttempt(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	id, key := r.PathValue("id"), r.Header.Get("Idempotency-Key")
	if key == "" || !validKey(key) {
		return errorf(http.StatusBadRequest, codeInvalidRequest,
			"Idempotency-Key: an attempt needs one (its own key), at most %d printable characters", maxIdempotencyKey)
	}
	wait, err := parseWait(r)
	if err != nil {
		return err
	}
	var in struct {
		Claim commitlayer.Claim `json:"claim"`
		Trace json.RawMessage   `json:"trace"`
		At    *string           `json:"at"`
	}
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), &in); err != nil {
		return err
	}
	a := service.Attempt{Claim: in.Claim, Trace: in.Trace}
	if in.At != nil {
		if a.At, err = parseTime(*in.At); err != nil || a.At.Before(minTime) || a.At.After(s.now().Add(s.maxFutureSkew)) {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "at: an RFC 3339 time between %s and now",
				minTime.Format("2006-01-02"))
		}
	}
	if !storable(id) {
		return notFound("action", id)
	}
	rctx, cancel := context.WithTimeout(r.Context(), service.RecordTimeout)
	rec, created, err := s.actions.RecordAttempt(rctx, t.ID, id, key, a)
	cancel()
	var ce *commitlayer.Error
	switch {
	case err == nil:
	case isNotFound(err):
		return notFound("action", id)
	case isConflict(err):
		return errorf(http.StatusConflict, codeIdempotency,
			"Idempotency-Key %q was used with another attempt or action", commitlayer.Clip(key, 64))
	case errors.As(err, &ce):
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", ce.Message)
	case isInvalid(err):
		return errorf(http.StatusBadRequest, codeInvalidRequest, "the attempt holds a value the store cannot keep")
	default:
		return err
	}
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	url := "/v1/actions/" + rec.ID
	w.Header().Set("Location", url)
	if !wait.On {
		s.actions.RecheckLater(r.Context(), t.ID, []commitlayer.ActionRecord{rec})
	} else if v := s.actions.RecheckAfter(r.Context(), t.ID, rec, wait); v != nil {
		view := viewVerdict(*v)
		return writeJSON(w, http.StatusOK, client.Accepted{ID: rec.ID, VerdictURL: url, Verification: commitlayer.VerificationStarted, Verdict: &view})
	}
	return writeJSON(w, http.StatusAccepted, client.Accepted{ID: rec.ID, VerdictURL: url, Verification: rec.Verification()})
}
