package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/service"
)

const maxIdempotencyKey = 255

// validKey reports whether an Idempotency-Key (empty: none) is at most
// maxIdempotencyKey printable characters the store can keep.
func validKey(key string) bool {
	return len(key) <= maxIdempotencyKey && storable(key) &&
		!strings.ContainsFunc(key, func(c rune) bool { return c < 0x20 || c == 0x7f })
}

// GET /v1/actions/orphans looks back orphanWindow by default and at most
// maxOrphanLookback: the scan is bounded, and year 1 is a 400, not a 500.
const (
	orphanWindow      = 7 * 24 * time.Hour
	maxOrphanLookback = 366 * 24 * time.Hour
)

// postAction records an action and starts its verification: 202, or with
// ?wait= 200 with the verdict once at that stage. The same Idempotency-Key
// (or id) with the same body replays; with another body it is 409.
func (s *Server) postAction(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	key := r.Header.Get("Idempotency-Key")
	if !validKey(key) {
		return errorf(http.StatusBadRequest, codeInvalidRequest,
			"Idempotency-Key: must be at most %d printable characters", maxIdempotencyKey)
	}
	wait, err := parseWait(r)
	if err != nil {
		return err
	}
	req, err := decodeAction(http.MaxBytesReader(w, r.Body, MaxBody), s.bound())
	if err != nil {
		return err
	}
	sub, err := s.actions.Submit(r.Context(), t.ID, req.Action, key, req.Hash, wait)
	if err != nil {
		var fe *commitlayer.FieldError
		switch {
		case clientError(err) != nil:
			return err
		case isConflict(err) && key != "":
			return errorf(http.StatusConflict, codeIdempotency,
				"Idempotency-Key %q was used with another request", commitlayer.Clip(key, 64))
		case isConflict(err):
			return errorf(http.StatusConflict, codeIdempotency,
				"action %q exists with another request", commitlayer.Clip(req.Action.ID, 128))
		case isInvalid(err) && errors.As(err, &fe):
			return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", fe.Error())
		case isInvalid(err):
			s.logError(r, "create action: invalid", err)
			return errorf(http.StatusBadRequest, codeInvalidRequest, "the action holds a value the store cannot keep")
		default:
			return err
		}
	}
	if sub.Created {
		s.metrics.actions.WithLabelValues("created").Inc()
	} else {
		s.metrics.actions.WithLabelValues("replayed").Inc()
		w.Header().Set("Idempotent-Replayed", "true")
	}
	url := "/v1/actions/" + sub.Action.ID
	w.Header().Set("Location", url)
	if sub.Verdict != nil {
		v := viewVerdict(*sub.Verdict)
		return writeJSON(w, http.StatusOK, client.Accepted{ID: sub.Action.ID, VerdictURL: url, Verification: sub.Verification, Verdict: &v})
	}
	return writeJSON(w, http.StatusAccepted, client.Accepted{ID: sub.Action.ID, VerdictURL: url, Verification: sub.Verification,
		VerificationError: sub.Refused})
}

func viewAction(rec commitlayer.ActionRecord) client.StoredAction {
	a := rec.Action
	if a.Params == nil {
		a.Params = commitlayer.Attrs{}
	}
	return client.StoredAction{Action: a, SettlesAt: rec.SettlesAt, WatchUntil: rec.WatchUntil, CreatedAt: rec.CreatedAt}
}

// viewVerdict returns v with empty lists as [] rather than null.
func viewVerdict(v commitlayer.Verdict) commitlayer.Verdict {
	fs := make([]commitlayer.Finding, 0, len(v.Findings))
	for _, f := range v.Findings {
		if f.Facts == nil {
			f.Facts = []string{}
		}
		if f.Hint == "" {
			f.Hint = commitlayer.Hint(f.Code)
		}
		fs = append(fs, f)
	}
	v.Findings = fs
	if v.UnavailableSources == nil {
		v.UnavailableSources = []string{}
	}
	return v
}

// getAction answers {"action","verdict","history"}, with ?wait= once the
// verdict is at that stage or the timeout passed.
func (s *Server) getAction(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	wait, err := parseWait(r)
	if err != nil {
		return err
	}
	rec, err := s.action(r)
	if err != nil {
		return err
	}
	if wait.On {
		s.actions.WaitFor(r.Context(), t.ID, rec, wait)
	}
	history, err := s.store.VerdictHistory(r.Context(), t.ID, rec.ID)
	if err != nil {
		return fmt.Errorf("verdict history: %w", err)
	}
	history = views(history, viewVerdict)
	var current *commitlayer.Verdict
	if len(history) > 0 {
		current = &history[len(history)-1]
	}
	// A verdict means started, even when this process never marked it.
	state := rec.Verification()
	if current != nil && state == commitlayer.VerificationPending {
		state = commitlayer.VerificationStarted
	}
	return writeJSON(w, http.StatusOK, client.ActionDetail{Action: viewAction(rec), Verification: state,
		VerificationError: rec.VerificationError, Verdict: current, History: history})
}

// action loads the action named in the path (404 when none).
func (s *Server) action(r *http.Request) (commitlayer.ActionRecord, error) {
	id := r.PathValue("id")
	if !storable(id) {
		return commitlayer.ActionRecord{}, notFound("action", id)
	}
	rec, err := s.store.GetAction(r.Context(), tenantOf(r.Context()).ID, id)
	return rec, storeErr(err, "get", "action", id)
}

// recheck forces a re-verification: 409 when it never started or its
// watch is over, 503 when Temporal cannot run it now.
func (s *Server) recheck(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	rec, err := s.action(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), recheckTimeout)
	defer cancel()
	v, err := s.actions.Recheck(ctx, t.ID, rec)
	switch {
	case err == nil:
		return writeJSON(w, http.StatusOK, client.RecheckResult{Verdict: viewVerdict(v)})
	case errors.Is(err, service.ErrNotStarted):
		return errorf(http.StatusConflict, codeVerificationEnded,
			"the verification of action %s was never started: %s", rec.ID, rec.VerificationError)
	case s.now().After(rec.WatchUntil):
		return errorf(http.StatusConflict, codeVerificationEnded,
			"the verification of action %s ended at %s; its last verdict stands", rec.ID, rec.WatchUntil.UTC().Format(time.RFC3339))
	default:
		s.logError(r, "recheck", err)
		w.Header().Set("Retry-After", "5")
		return errorf(http.StatusServiceUnavailable, codeUnavailable,
			"the verification of action %s could not be re-run now; retry later", rec.ID)
	}
}

// orphans lists a contract's effects no recorded action accounts for,
// from since until now.
func (s *Server) orphans(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	q := r.URL.Query()
	id := q.Get("contract_id")
	if id == "" {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "contract_id: is required")
	}
	if !storable(id) {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "contract_id: must be UTF-8 text without NUL")
	}
	now := s.now().UTC()
	since := now.Add(-orphanWindow)
	if v := q.Get("since"); v != "" {
		ts, err := parseTime(v)
		if err != nil {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "since: %s", err.Error())
		}
		switch earliest := now.Add(-maxOrphanLookback); {
		case ts.Before(earliest):
			return errorf(http.StatusBadRequest, codeInvalidRequest,
				"since: must be at most %d days before now (%s or later)", maxOrphanLookback/(24*time.Hour), earliest.Format(time.RFC3339))
		case ts.After(now):
			return errorf(http.StatusBadRequest, codeInvalidRequest,
				"since: must not be after now (%s)", now.Format(time.RFC3339))
		}
		since = ts
	}
	orphans, err := s.actions.Orphans(r.Context(), t.ID, id, since, now)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, client.OrphanList{Since: since, Until: now, Orphans: views(orphans,
		func(o contracts.Orphan) client.Orphan {
			return client.Orphan{ContractID: o.Contract, Check: o.Check, Fact: o.Fact}
		})})
}

// Bounds of ?wait=…&timeout=…, well under the server's write timeout (120 s).
const (
	defaultWaitTimeout = 20 * time.Second
	maxWaitTimeout     = 60 * time.Second
)

// parseWait reads wait (provisional|final) and timeout ("15" or "15s").
func parseWait(r *http.Request) (service.Wait, error) {
	q := r.URL.Query()
	var p service.Wait
	switch w := q.Get("wait"); w {
	case "":
		if q.Has("timeout") {
			return p, errorf(http.StatusBadRequest, codeInvalidRequest, "timeout: only with wait=provisional or wait=final")
		}
		return p, nil
	case "provisional", "final":
		p.On, p.Final = true, w == "final"
	default:
		return p, errorf(http.StatusBadRequest, codeInvalidRequest, "wait: must be provisional or final, not %q", commitlayer.Clip(w, 32))
	}
	p.Timeout = defaultWaitTimeout
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.ParseFloat(v, 64)
			if nerr != nil {
				return p, errorf(http.StatusBadRequest, codeInvalidRequest, "timeout: must be seconds (15) or a duration (15s), not %q", commitlayer.Clip(v, 32))
			}
			d = time.Duration(n * float64(time.Second))
		}
		if d <= 0 || d > maxWaitTimeout {
			return p, errorf(http.StatusBadRequest, codeInvalidRequest, "timeout: must be more than 0 and at most %s", maxWaitTimeout)
		}
		p.Timeout = d
	}
	return p, nil
}
