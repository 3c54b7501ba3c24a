package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/service"
)

// maxIdempotencyKey bounds an Idempotency-Key header.
const maxIdempotencyKey = 255

// orphanWindow is how far back GET /v1/actions/orphans looks by default,
// and maxOrphanLookback how far back its since may reach: the scan is
// bounded, and a time the store cannot take (year 1) is a 400, not a 500.
const (
	orphanWindow      = 7 * 24 * time.Hour
	maxOrphanLookback = 366 * 24 * time.Hour
)

// postAction records an action and starts its verification: 202
// {"id","verdict_url"} with Location. With ?wait=provisional|final (and
// timeout) it answers 200 with the verdict once it is at that stage, or 202
// as without wait when the timeout passes first (wait.go). The same Idempotency-Key (or the same
// client-given id) with the same body answers the same action and starts
// nothing new; with another body it is 409.
func (s *Server) postAction(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey || !storable(key) ||
		strings.IndexFunc(key, func(c rune) bool { return c < 0x20 || c == 0x7f }) >= 0 {
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest,
			"Idempotency-Key: must be at most %d printable characters", maxIdempotencyKey))
		return
	}
	wait, err := parseWait(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := decodeAction(http.MaxBytesReader(w, r.Body, MaxBody),
		s.bound())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rctx, cancel := context.WithTimeout(r.Context(), recordTimeout)
	stored, created, err := s.actions.Record(rctx, t.ID, req.Action, key, req.Hash)
	cancel()
	if err != nil {
		var fe *commitlayer.FieldError
		var ae *apiError
		var ce *commitlayer.Error
		var stale *service.StaleContractError
		switch {
		case errors.As(err, &ae), errors.As(err, &ce), errors.As(err, &stale):
			s.writeError(w, r, err)
		case isConflict(err) && key != "":
			s.writeError(w, r, errorf(http.StatusConflict, codeIdempotency,
				"Idempotency-Key %q was used with another request", truncate(key, 64)))
		case isConflict(err):
			s.writeError(w, r, errorf(http.StatusConflict, codeIdempotency,
				"action %q exists with another request", truncate(req.Action.ID, 128)))
		case isInvalid(err) && errors.As(err, &fe):
			s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "%s", fe.Error()))
		case isInvalid(err):
			s.logError(r, "create action: invalid", err)
			s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "the action holds a value the store cannot keep"))
		default:
			s.writeError(w, r, err)
		}
		return
	}
	startKey := t.ID + "\x00" + stored.ID
	if created {
		s.metrics.actions.WithLabelValues("created").Inc()
	} else {
		s.metrics.actions.WithLabelValues("replayed").Inc()
		w.Header().Set("Idempotent-Replayed", "true")
	}
	var st startState
	fresh := created || s.needsStart(r.Context(), t.ID, stored.ID, startKey)
	if !created && !stored.VerificationFailedAt.IsZero() {
		// A replay of an action whose start was refused for good: say so,
		// start nothing.
		st = startState{refused: stored.VerificationError}
	}
	switch {
	case st.refused != "":
	case wait.on:
		v, left := s.startAndWait(r, t.ID, stored, fresh, startKey, wait)
		if v != nil {
			writeWaited(w, stored.ID, *v)
			return
		}
		st = left
	default:
		// Left to the reconciler when Temporal does not answer: the
		// action is stored with its start pending; the client need not
		// resend.
		st = s.startOrLeave(r, t.ID, stored, fresh, startKey)
	}
	url := "/v1/actions/" + stored.ID
	w.Header().Set("Location", url)
	writeJSON(w, http.StatusAccepted, client.Accepted{ID: stored.ID, VerdictURL: url, Verification: st.verification(),
		VerificationError: st.refused})
}

// errTemporalAway stands for a call not made: Temporal failed moments ago.
var errTemporalAway = errors.New("temporal did not answer moments ago; left to the reconciler")

// start starts the verification of a stored action.
func (s *Server) start(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	if s.verifier == nil {
		return errors.New("no verifier configured")
	}
	return s.verifier.Start(ctx, tenantID, a)
}

// needsStart reports whether a replayed action may never have had its
// verification started: not by this process, and no verdict stored.
func (s *Server) needsStart(ctx context.Context, tenantID, actionID, startKey string) bool {
	if s.started.has(startKey) {
		return false
	}
	_, err := s.actionDB.LatestVerdict(ctx, tenantID, actionID)
	return isNotFound(err)
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
	if v.Findings == nil {
		v.Findings = []commitlayer.Finding{}
	}
	fs := make([]commitlayer.Finding, len(v.Findings))
	for i, f := range v.Findings {
		if f.Facts == nil {
			f.Facts = []string{}
		}
		if f.Hint == "" { // stored before findings carried one
			f.Hint = commitlayer.Hint(f.Code)
		}
		fs[i] = f
	}
	v.Findings = fs
	if v.UnavailableSources == nil {
		v.UnavailableSources = []string{}
	}
	return v
}

// getAction answers {"action","verdict","history"}; verdict is null until
// the first one is stored. With ?wait=provisional|final (and timeout) it
// answers once the verdict is at that stage or the timeout passed.
func (s *Server) getAction(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	wait, err := parseWait(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, ok := s.action(w, r)
	if !ok {
		return
	}
	if wait.on {
		// Hold the answer until the verdict is at the stage or the
		// timeout passes; either way the stored state answers.
		s.startAndWait(r, t.ID, rec, false, t.ID+"\x00"+rec.ID, wait)
	}
	history, err := s.actionDB.VerdictHistory(r.Context(), t.ID, rec.ID)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("verdict history: %w", err))
		return
	}
	views := make([]commitlayer.Verdict, len(history))
	for i, v := range history {
		views[i] = viewVerdict(v)
	}
	var current *commitlayer.Verdict
	if len(views) > 0 {
		current = &views[len(views)-1]
	}
	// "verification" is where the verification is: started, pending (its
	// start left to the reconciler) or failed (Temporal refused its start
	// for good; verification_error says why). A verdict means started, even
	// when this process never marked it.
	state := rec.Verification()
	if current != nil && state == commitlayer.VerificationPending {
		state = commitlayer.VerificationStarted
	}
	writeJSON(w, http.StatusOK, client.ActionDetail{Action: viewAction(rec), Verification: state,
		VerificationError: rec.VerificationError, Verdict: current, History: views})
}

// action loads the action named in the path, answering 404 when the tenant
// has none by that id.
func (s *Server) action(w http.ResponseWriter, r *http.Request) (commitlayer.ActionRecord, bool) {
	id := r.PathValue("id")
	if !storable(id) {
		s.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no action %q", truncate(id, 128)))
		return commitlayer.ActionRecord{}, false
	}
	rec, err := s.actionDB.GetAction(r.Context(), tenantOf(r.Context()).ID, id)
	switch {
	case isNotFound(err):
		s.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no action %q", truncate(id, 128)))
		return rec, false
	case err != nil:
		s.writeError(w, r, fmt.Errorf("get action: %w", err))
		return rec, false
	}
	return rec, true
}

// recheck forces a re-verification and answers {"verdict"}.
func (s *Server) recheck(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	rec, ok := s.action(w, r)
	if !ok {
		return
	}
	if s.verifier == nil {
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable, "verification is not enabled on this server"))
		return
	}
	if !rec.VerificationFailedAt.IsZero() {
		s.writeError(w, r, errorf(http.StatusConflict, codeVerificationEnded,
			"the verification of action %s was never started: %s", rec.ID, rec.VerificationError))
		return
	}
	if s.temporalAway() {
		// Temporal failed moments ago: answer now rather than wait on it.
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable,
			"Temporal is unavailable; the verification of action %s could not be re-run now; retry later", rec.ID))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), recheckTimeout)
	defer cancel()
	// The verifier answers within about 2 s when Temporal is away
	// (verify.Client probes the workflow before the update).
	v, err := s.verifier.Recheck(ctx, t.ID, rec.ID)
	if err != nil {
		s.logError(r, "recheck", err)
		if errors.Is(err, commitlayer.ErrUnavailable) {
			s.temporalFailed()
		}
		if s.now().After(rec.WatchUntil) {
			s.writeError(w, r, errorf(http.StatusConflict, codeVerificationEnded,
				"the verification of action %s ended at %s; its last verdict stands", rec.ID, rec.WatchUntil.UTC().Format(time.RFC3339)))
			return
		}
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable,
			"the verification of action %s could not be re-run now; retry later", rec.ID))
		return
	}
	writeJSON(w, http.StatusOK, client.RecheckResult{Verdict: viewVerdict(v)})
}

// orphans lists effects of the kinds a contract expects or forbids on
// subjects with no recorded action of it in the window: from since (default
// 7 days ago; at most 366 days ago, and not after now) until now.
func (s *Server) orphans(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	q := r.URL.Query()
	id := q.Get("contract_id")
	if id == "" {
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "contract_id: is required"))
		return
	}
	if !storable(id) {
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "contract_id: must be UTF-8 text without NUL"))
		return
	}
	now := s.now().UTC()
	since := now.Add(-orphanWindow)
	if v := q.Get("since"); v != "" {
		ts, err := parseTime(v)
		if err != nil {
			s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "since: %s", err.Error()))
			return
		}
		switch earliest := now.Add(-maxOrphanLookback); {
		case ts.Before(earliest):
			s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest,
				"since: must be at most %d days before now (%s or later)", maxOrphanLookback/(24*time.Hour), earliest.Format(time.RFC3339)))
			return
		case ts.After(now):
			s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest,
				"since: must not be after now (%s)", now.Format(time.RFC3339)))
			return
		}
		since = ts
	}
	orphans, err := s.actions.Orphans(r.Context(), t.ID, id, since, now)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := client.OrphanList{Orphans: []client.Orphan{}, Since: since, Until: now}
	for _, o := range orphans {
		out.Orphans = append(out.Orphans, client.Orphan{ContractID: o.Contract, Check: o.Check, Fact: o.Fact})
	}
	writeJSON(w, http.StatusOK, out)
}
