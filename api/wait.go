package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
)

// Waiter is optionally implemented by the Verifier: POST
// /v1/actions?wait= starts the verification and waits for its verdict in
// one call to Temporal (update-with-start), with no polling. Wait returns
// the verdict and whether it is at the stage asked (first verdict, or with
// final a non-provisional one); ctx's error when ctx ended first.
type Waiter interface {
	Wait(ctx context.Context, tenantID string, a commitlayer.ActionRecord, final, fresh bool) (commitlayer.Verdict, bool, error)
}

// Bounds of POST /v1/actions?wait=…&timeout=…: the HTTP server's write
// timeout (120 s) stays well above the longest wait.
const (
	defaultWaitTimeout = 20 * time.Second
	maxWaitTimeout     = 60 * time.Second
)

// waitParams are the wait and timeout query parameters of POST
// /v1/actions.
type waitParams struct {
	on      bool
	final   bool
	timeout time.Duration
}

// parseWait reads wait (provisional|final) and timeout (seconds, "15", or
// a Go duration, "15s"; at most 60 s; default 20 s).
func parseWait(r *http.Request) (waitParams, error) {
	q := r.URL.Query()
	var p waitParams
	switch w := q.Get("wait"); w {
	case "":
		if q.Has("timeout") {
			return p, errorf(http.StatusBadRequest, codeInvalidRequest, "timeout: only with wait=provisional or wait=final")
		}
		return p, nil
	case "provisional", "final":
		p.on, p.final = true, w == "final"
	default:
		return p, errorf(http.StatusBadRequest, codeInvalidRequest, "wait: must be provisional or final, not %q", truncate(w, 32))
	}
	p.timeout = defaultWaitTimeout
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.ParseFloat(v, 64)
			if nerr != nil {
				return p, errorf(http.StatusBadRequest, codeInvalidRequest, "timeout: must be seconds (15) or a duration (15s), not %q", truncate(v, 32))
			}
			d = time.Duration(n * float64(time.Second))
		}
		if d <= 0 || d > maxWaitTimeout {
			return p, errorf(http.StatusBadRequest, codeInvalidRequest, "timeout: must be more than 0 and at most %s", maxWaitTimeout)
		}
		p.timeout = d
	}
	return p, nil
}

// reached reports whether v is at the stage p asks for.
func (p waitParams) reached(v commitlayer.Verdict) bool {
	return v.Version > 0 && (!p.final || !v.Provisional)
}

// startAndWait starts the verification of a stored action (unless it runs)
// and waits up to p.timeout for its verdict at the stage asked. It returns
// the verdict when it got there (the API answers 200), otherwise nil and
// whether the start was left to the reconciler (the API answers 202 as
// without wait). A verdict already stored answers at once; with no Waiter,
// or Temporal away moments ago, it starts as without wait.
func (s *Server) startAndWait(r *http.Request, tenantID string, rec commitlayer.ActionRecord, fresh bool, startKey string, p waitParams) (*commitlayer.Verdict, startState) {
	// A fresh action has no verdict stored (just created, or needsStart
	// found none): no need to look.
	if !fresh {
		if v, ok := s.storedAt(r.Context(), tenantID, rec.ID, p); ok {
			return v, startState{}
		}
	}
	waiter, ok := s.verifier.(Waiter)
	if !ok || s.temporalAway() {
		return nil, s.startOrLeave(r, tenantID, rec, fresh, startKey)
	}
	// The start must not depend on the caller staying: it is bounded by the
	// wait, not cut by a hang-up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.timeout)
	v, reached, err := waiter.Wait(ctx, tenantID, rec, p.final, fresh)
	timedOut := ctx.Err() != nil
	cancel()
	switch {
	case err == nil:
		s.temporalAnswered()
		s.started.add(startKey)
		if reached {
			return &v, startState{}
		}
		return nil, startState{}
	case timedOut:
		// Not at the stage in time. Whether the start went through is not
		// known: start again (idempotent), then answer 202 as without wait.
		st := s.startOrLeave(r, tenantID, rec, fresh, startKey)
		if v, ok := s.storedAt(r.Context(), tenantID, rec.ID, p); ok {
			return v, startState{}
		}
		return nil, st
	default:
		// Ended (its stored verdicts are all there is), or Temporal failed.
		if v, ok := s.storedAt(r.Context(), tenantID, rec.ID, p); ok {
			return v, startState{}
		}
		s.log.WarnContext(r.Context(), "wait for verdict", "err", err,
			"request_id", requestIDOf(r.Context()), "tenant", tenantID, "action", rec.ID)
		return nil, s.startOrLeave(r, tenantID, rec, fresh, startKey)
	}
}

// storedAt returns the action's latest stored verdict when it is at the
// stage p asks for.
func (s *Server) storedAt(ctx context.Context, tenantID, actionID string, p waitParams) (*commitlayer.Verdict, bool) {
	v, err := s.actionDB.LatestVerdict(ctx, tenantID, actionID)
	if err != nil || !p.reached(v) {
		return nil, false
	}
	return &v, true
}

// startState is how a start went: left to the reconciler (pending), or
// refused for good by Temporal (refused holds the reason; the action is
// marked failed).
type startState struct {
	pending bool
	refused string
}

// verification names the state for the wire ("started", "pending",
// "failed").
func (st startState) verification() string {
	switch {
	case st.refused != "":
		return commitlayer.VerificationFailed
	case st.pending:
		return commitlayer.VerificationPending
	}
	return commitlayer.VerificationStarted
}

// startRefused is the verifier's error for a start Temporal refused for
// good (verify.StartRefusedError).
type startRefused interface{ StartRefused() string }

// startOrLeave starts the verification when it may never have been
// started, as POST /v1/actions does without wait, and reports whether it
// was left to the reconciler or refused for good.
func (s *Server) startOrLeave(r *http.Request, tenantID string, rec commitlayer.ActionRecord, fresh bool, startKey string) startState {
	if !fresh {
		return startState{}
	}
	err := errTemporalAway
	if !s.temporalAway() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), startTimeout)
		err = s.start(ctx, tenantID, rec)
		cancel()
		var refused startRefused
		switch {
		case errors.As(err, &refused):
			// Temporal answered: it is not away, this start is bad.
			s.temporalAnswered()
			s.log.WarnContext(r.Context(), "verification start refused; marked failed", "err", err,
				"request_id", requestIDOf(r.Context()), "tenant", tenantID, "action", rec.ID)
			return startState{refused: refused.StartRefused()}
		case err != nil:
			s.temporalFailed()
		default:
			s.temporalAnswered()
		}
	}
	if err != nil {
		s.log.WarnContext(r.Context(), "verification start left to the reconciler", "err", err,
			"request_id", requestIDOf(r.Context()), "tenant", tenantID, "action", rec.ID)
		s.kickReconciler()
		return startState{pending: true}
	}
	s.started.add(startKey)
	return startState{}
}

// writeWaited answers a POST /v1/actions?wait= whose verdict got to the
// stage asked: 200 {"id","verdict_url","verification","verdict"}.
func writeWaited(w http.ResponseWriter, id string, v commitlayer.Verdict) {
	url := "/v1/actions/" + id
	w.Header().Set("Location", url)
	v = viewVerdict(v)
	writeJSON(w, http.StatusOK, client.Accepted{ID: id, VerdictURL: url, Verification: commitlayer.VerificationStarted, Verdict: &v})
}
