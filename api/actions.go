package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/postgres"
)

// maxIdempotencyKey bounds an Idempotency-Key header.
const maxIdempotencyKey = 255

// orphanWindow is how far back GET /v1/actions/orphans looks by default.
const orphanWindow = 7 * 24 * time.Hour

// postAction records an action and starts its verification: 202
// {"id","verdict_url"} with Location. The same Idempotency-Key (or the same
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
	req, err := decodeAction(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stored, created, err := s.RecordAction(r.Context(), t.ID, req.Action, key, req.Hash)
	if err != nil {
		var fe *commitlayer.FieldError
		var ae *apiError
		switch {
		case errors.As(err, &ae):
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
	if created || s.needsStart(r.Context(), t.ID, stored.ID, startKey) {
		if err := s.start(r.Context(), t.ID, stored); err != nil {
			// The action is stored; a retry with the same key (or id)
			// starts it, since no verdict exists and this process has no
			// record of a start.
			s.logError(r, "start verification", err)
			w.Header().Set("Retry-After", "1")
			s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable,
				"action %s is recorded but its verification could not be started; retry the same request", stored.ID))
			return
		}
		s.started.add(startKey)
	}
	url := "/v1/actions/" + stored.ID
	w.Header().Set("Location", url)
	writeJSON(w, http.StatusAccepted, map[string]string{"id": stored.ID, "verdict_url": url})
}

// RecordAction records an action the way POST /v1/actions does, without
// starting its verification: requested_at defaults to now, the contract's
// latest version is pinned, the subject type is checked, settles_at and
// watch_until come from the contract, and the idempotency key (with the
// request's hash) makes a retry return the same action (created false). The
// sandbox harness records its agents' actions through it. Errors for the
// caller's input are *apiError values (422) or wrap postgres.ErrConflict /
// postgres.ErrInvalid.
func (s *Server) RecordAction(ctx context.Context, tenantID string, a commitlayer.Action, idempotencyKey string, requestHash []byte) (postgres.ActionRecord, bool, error) {
	if a.RequestedAt.IsZero() {
		a.RequestedAt = s.now().UTC()
	}
	rec, c, err := s.loadContract(ctx, tenantID, a.Contract, a.ContractVersion)
	if err != nil {
		return postgres.ActionRecord{}, false, err
	}
	if want := c.Spec.Subject; want != "" && a.Subject.Type() != want {
		return postgres.ActionRecord{}, false, errorf(http.StatusUnprocessableEntity, codeSubjectMismatch,
			"subject: contract %s acts on %q subjects, not %q", c.ID(), want, a.Subject.Type())
	}
	a.ContractVersion = rec.Version
	settlesAt := c.SettlesAt(a.RequestedAt)
	watchUntil := c.WatchUntil(a.RequestedAt)
	stored, created, err := s.store.CreateAction(ctx, tenantID, a, settlesAt, watchUntil, idempotencyKey, requestHash)
	if err != nil {
		return postgres.ActionRecord{}, false, fmt.Errorf("create action: %w", err)
	}
	return stored, created, nil
}

// start starts the verification of a stored action.
func (s *Server) start(ctx context.Context, tenantID string, a postgres.ActionRecord) error {
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
	_, err := s.store.LatestVerdict(ctx, tenantID, actionID)
	return isNotFound(err)
}

// actionView is a stored action on the wire.
type actionView struct {
	commitlayer.Action
	SettlesAt  time.Time `json:"settles_at"`
	WatchUntil time.Time `json:"watch_until"`
	CreatedAt  time.Time `json:"created_at"`
}

func viewAction(rec postgres.ActionRecord) actionView {
	a := rec.Action
	if a.Params == nil {
		a.Params = commitlayer.Attrs{}
	}
	return actionView{Action: a, SettlesAt: rec.SettlesAt, WatchUntil: rec.WatchUntil, CreatedAt: rec.CreatedAt}
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
		fs[i] = f
	}
	v.Findings = fs
	if v.UnavailableSources == nil {
		v.UnavailableSources = []string{}
	}
	return v
}

// getAction answers {"action","verdict","history"}; verdict is null until
// the first one is stored.
func (s *Server) getAction(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	rec, ok := s.action(w, r)
	if !ok {
		return
	}
	history, err := s.store.VerdictHistory(r.Context(), t.ID, rec.ID)
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
	writeJSON(w, http.StatusOK, struct {
		Action  actionView            `json:"action"`
		Verdict *commitlayer.Verdict  `json:"verdict"`
		History []commitlayer.Verdict `json:"history"`
	}{viewAction(rec), current, views})
}

// action loads the action named in the path, answering 404 when the tenant
// has none by that id.
func (s *Server) action(w http.ResponseWriter, r *http.Request) (postgres.ActionRecord, bool) {
	id := r.PathValue("id")
	if !storable(id) {
		s.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no action %q", truncate(id, 128)))
		return postgres.ActionRecord{}, false
	}
	rec, err := s.store.GetAction(r.Context(), tenantOf(r.Context()).ID, id)
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
	ctx, cancel := context.WithTimeout(r.Context(), recheckTimeout)
	defer cancel()
	v, err := s.verifier.Recheck(ctx, t.ID, rec.ID)
	if err != nil {
		s.logError(r, "recheck", err)
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
	writeJSON(w, http.StatusOK, map[string]any{"verdict": viewVerdict(v)})
}

type orphanView struct {
	ContractID string           `json:"contract_id"`
	Check      string           `json:"check"`
	Fact       commitlayer.Fact `json:"fact"`
}

// orphans lists effects of the kinds a contract expects or forbids on
// subjects with no recorded action of it in the window.
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
		since = ts
	}
	orphans, err := s.Orphans(r.Context(), t.ID, id, since, now)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := []orphanView{}
	for _, o := range orphans {
		out = append(out, orphanView{ContractID: o.Contract, Check: o.Check, Fact: o.Fact})
	}
	writeJSON(w, http.StatusOK, map[string]any{"orphans": out, "since": since, "until": now})
}

// Orphans lists the effects of the kinds a contract expects or forbids that
// occurred in [since, until] on subjects with no recorded action of it
// (directly or through links), as GET /v1/actions/orphans does. The sandbox
// harness uses it too.
func (s *Server) Orphans(ctx context.Context, tenantID, contractID string, since, until time.Time) ([]contracts.Orphan, error) {
	_, c, err := s.loadContract(ctx, tenantID, contractID, 0)
	if err != nil {
		return nil, err
	}
	var kinds []postgres.FactKind
	for _, k := range c.EffectKinds() {
		kinds = append(kinds, postgres.FactKind{Source: k.Source, Type: k.Type})
	}
	facts, err := s.store.FactsOfKinds(ctx, tenantID, kinds, since, until)
	if err != nil {
		return nil, fmt.Errorf("orphans: facts: %w", err)
	}
	// An effect at since may belong to an action requested up to
	// settlement + watch before it.
	actions, err := s.store.ActionsOfContract(ctx, tenantID, c.ID(), since.Add(-(c.Settlement() + c.Watch())))
	if err != nil {
		return nil, fmt.Errorf("orphans: actions: %w", err)
	}
	return contracts.Orphans(c, actions, facts), nil
}
