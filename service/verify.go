package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Verifier is what recording and verifying need of Temporal
// (verify.Client has it).
type Verifier interface {
	// Start begins the verification of a stored action; one that exists
	// already is not an error.
	Start(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error
	// Wait starts it unless it runs and waits for a verdict at the stage
	// (the first, or with final a settled one): update-with-start.
	Wait(ctx context.Context, tenantID string, a commitlayer.ActionRecord, final bool) (commitlayer.Verdict, bool, error)
	// Recheck runs a pass with a fresh pull now and returns its verdict.
	Recheck(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error)
	// Signal tells verifications that facts on their subjects arrived.
	Signal(ctx context.Context, tenantID string, acts []commitlayer.ActionRecord) error
	// EnsurePoller starts the tenant's connector poller unless it runs.
	EnsurePoller(ctx context.Context, tenantID string) error
}

// refusal is a start Temporal refused for good (verify.StartRefusedError).
type refusal interface{ StartRefused() string }

// Bounds of the calls a request makes; what they did not finish is left to
// the reconciler.
const (
	RecordTimeout = 3 * time.Second
	startTimeout  = 2 * time.Second
	// awayFor is how long, after a start timed out, new ones go straight to
	// the reconciler: requests answer in milliseconds during an outage.
	awayFor = 5 * time.Second
)

// Wait says whether a caller waits for the verdict, for which stage, and
// how long at most.
type Wait struct {
	On, Final bool
	Timeout   time.Duration
}

// reached reports whether v is at the stage w asks for.
func (w Wait) reached(v commitlayer.Verdict) bool {
	return v.Version > 0 && (!w.Final || !v.Provisional)
}

// Submitted is what recording an action and starting its verification did.
type Submitted struct {
	Action  commitlayer.ActionRecord
	Created bool // false: an idempotent replay of an action recorded before
	// Verdict is the verdict waited for, when it got to the stage asked.
	Verdict *commitlayer.Verdict
	// Verification is where the verification is: commitlayer.VerificationStarted,
	// Pending (its start left to the reconciler) or Failed (Temporal refused
	// it for good; Refused says why).
	Verification string
	Refused      string
}

// Submit records an action (idempotently: see Record) and starts its
// verification: the one path for every entry point. With w.On it starts and
// waits in one call to Temporal (update-with-start) for the verdict at the
// stage asked, at most w.Timeout. A Temporal that does not answer leaves the
// start to the reconciler: the action is stored and nothing is lost.
func (s *Actions) Submit(ctx context.Context, tenantID string, a commitlayer.Action, idempotencyKey string, requestHash []byte, w Wait) (Submitted, error) {
	rctx, cancel := context.WithTimeout(ctx, RecordTimeout)
	rec, created, err := s.Record(rctx, tenantID, a, idempotencyKey, requestHash)
	cancel()
	if err != nil {
		return Submitted{}, err
	}
	out := Submitted{Action: rec, Created: created, Verification: rec.Verification(), Refused: rec.VerificationError}
	if out.Verification == commitlayer.VerificationFailed {
		return out, nil // a replay of an action whose start was refused for good
	}
	// A replay whose start is not marked yet is started again (Start is
	// idempotent): the first request may have crashed before it.
	fresh := out.Verification == commitlayer.VerificationPending
	switch {
	case w.On:
		out.Verdict, out.Verification, out.Refused = s.startAndWait(ctx, tenantID, rec, fresh, w)
	case created && s.FirstVerdict != nil:
		// The first verdict beside the start: both take about one
		// round trip of their own, and the answer finds it stored.
		done := make(chan struct{})
		go func() {
			defer close(done)
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
			defer cancel()
			if err := s.FirstVerdict(fctx, tenantID, rec.ID); err != nil {
				s.logger.WarnContext(ctx, "first verdict left to the verification", "tenant", tenantID, "action", rec.ID, "error", err)
			}
		}()
		out.Verification, out.Refused = s.start(ctx, tenantID, rec, done)
	case fresh:
		out.Verification, out.Refused = s.start(ctx, tenantID, rec, nil)
	}
	return out, nil
}

// StartLater starts, in the background, the verifications of recorded
// actions whose start is pending (an OTLP export's answer does not wait on
// Temporal); past maxBackground, the reconciler does.
func (s *Actions) StartLater(ctx context.Context, tenantID string, recs []commitlayer.ActionRecord) {
	var pending []commitlayer.ActionRecord
	for _, rec := range recs {
		if rec.Verification() == commitlayer.VerificationPending {
			pending = append(pending, rec)
		}
	}
	if len(pending) > 0 && !s.later(ctx, func(ctx context.Context) {
		for _, rec := range pending {
			s.start(ctx, tenantID, rec, nil)
		}
	}) && s.Kick != nil {
		s.Kick()
	}
}

// later runs fn in the background with a context that outlives ctx's
// cancellation, at most maxBackground at once; false when every slot is
// taken (fn does not run).
func (s *Actions) later(ctx context.Context, fn func(context.Context)) bool {
	select {
	case s.bg <- struct{}{}:
		ctx := context.WithoutCancel(ctx)
		go func() {
			defer func() { <-s.bg }()
			fn(ctx)
		}()
		return true
	default:
		return false
	}
}

// WaitFor waits, at most w.Timeout, for the verdict of a recorded action to
// be at the stage w asks for (GET /v1/actions/{id}?wait=), starting its
// verification when it never was; nil when it did not get there.
func (s *Actions) WaitFor(ctx context.Context, tenantID string, rec commitlayer.ActionRecord, w Wait) *commitlayer.Verdict {
	v, _, _ := s.startAndWait(ctx, tenantID, rec, rec.Verification() == commitlayer.VerificationPending, w)
	return v
}

// start starts the verification of a stored action within startTimeout,
// left to the reconciler (pending) when Temporal does not answer or failed
// moments ago. It returns the verification's state and, when Temporal
// refused it for good, why. first, when not nil, is closed once a first
// verdict answered beside the start is stored: a refused start is marked
// failed after it, which deletes it.
func (s *Actions) start(ctx context.Context, tenantID string, rec commitlayer.ActionRecord, first <-chan struct{}) (string, string) {
	if first != nil {
		defer func() { <-first }()
	}
	switch {
	case s.verifier == nil:
		return s.leave(ctx, tenantID, rec, errors.New("no verifier configured"))
	case s.away():
		return s.leave(ctx, tenantID, rec, errors.New("temporal did not answer moments ago"))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	err := s.verifier.Start(sctx, tenantID, rec)
	cancel()
	var refused refusal
	if first != nil && errors.As(err, &refused) {
		<-first // marked failed after it: the marking deletes its verdict
	}
	return s.started(ctx, tenantID, rec, err)
}

// started is what follows a start's answer: marked started (bookkeeping in
// the background), marked failed for good, or left to the reconciler.
func (s *Actions) started(ctx context.Context, tenantID string, rec commitlayer.ActionRecord, err error) (string, string) {
	var refused refusal
	switch {
	case err == nil:
		s.awayUntil.Store(0)
		s.background(ctx, tenantID, rec)
		return commitlayer.VerificationStarted, ""
	case errors.As(err, &refused):
		s.awayUntil.Store(0) // Temporal answered: this start is bad
		s.logger.WarnContext(ctx, "verification start refused; marked failed", "tenant", tenantID, "action", rec.ID, "error", err)
		if _, merr := s.store.StartFailed(context.WithoutCancel(ctx), tenantID, rec.ID, refused.StartRefused()); merr != nil {
			s.logger.ErrorContext(ctx, "mark refused start; the reconciler tries again", "action", rec.ID, "error", merr)
			return commitlayer.VerificationPending, ""
		}
		return commitlayer.VerificationFailed, refused.StartRefused()
	}
	s.awayUntil.Store(s.now().Add(awayFor).UnixNano())
	return s.leave(ctx, tenantID, rec, err)
}

// leave leaves a start to the reconciler.
func (s *Actions) leave(ctx context.Context, tenantID string, rec commitlayer.ActionRecord, why error) (string, string) {
	s.logger.WarnContext(ctx, "verification start left to the reconciler", "tenant", tenantID, "action", rec.ID, "error", why)
	if s.Kick != nil {
		s.Kick()
	}
	return commitlayer.VerificationPending, ""
}

func (s *Actions) away() bool { return s.now().UnixNano() < s.awayUntil.Load() }

// startAndWait starts the verification of a stored action (unless it runs)
// and waits up to w.Timeout for its verdict at the stage asked: the verdict
// when it got there, otherwise nil and the state of the start. A stored
// verdict answers at once; with Temporal away it only starts.
func (s *Actions) startAndWait(ctx context.Context, tenantID string, rec commitlayer.ActionRecord, fresh bool, w Wait) (*commitlayer.Verdict, string, string) {
	state := rec.Verification()
	if !fresh {
		if v := s.storedAt(ctx, tenantID, rec.ID, w); v != nil {
			return v, state, ""
		}
	}
	if s.verifier == nil || s.away() {
		if fresh {
			state, refused := s.start(ctx, tenantID, rec, nil)
			return nil, state, refused
		}
		return nil, state, ""
	}
	// Bounded by the wait, not cut by a hang-up.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.Timeout)
	v, reached, err := s.verifier.Wait(wctx, tenantID, rec, w.Final)
	timedOut := wctx.Err() != nil
	cancel()
	var refused refusal
	switch {
	case err == nil:
		if fresh {
			state, _ = s.started(ctx, tenantID, rec, nil)
		}
		if reached {
			return &v, state, ""
		}
		return nil, state, ""
	case errors.As(err, &refused):
		state, why := s.started(ctx, tenantID, rec, err)
		return nil, state, why
	case !timedOut:
		s.logger.WarnContext(ctx, "wait for verdict", "tenant", tenantID, "action", rec.ID, "error", err)
	}
	// Not at the stage in time, ended, or Temporal failed: whether the
	// start went through is not known; start again (idempotent), then
	// answer with what is stored.
	if fresh {
		state, _ = s.start(ctx, tenantID, rec, nil)
	}
	return s.storedAt(ctx, tenantID, rec.ID, w), state, ""
}

// storedAt returns the action's latest stored verdict when it is at the
// stage w asks for.
func (s *Actions) storedAt(ctx context.Context, tenantID, actionID string, w Wait) *commitlayer.Verdict {
	v, err := s.store.LatestVerdict(ctx, tenantID, actionID)
	if err != nil || !w.reached(v) {
		return nil
	}
	return &v
}

// maxBackground bounds the start bookkeeping done after a request answered;
// past it, the request does it before answering.
const maxBackground = 64

// background does a started verification's bookkeeping after the request
// answered (see afterStart); a crash before it ends leaves the action
// unmarked, and the reconciler starts it again, which is idempotent.
func (s *Actions) background(ctx context.Context, tenantID string, rec commitlayer.ActionRecord) {
	after := func(ctx context.Context) {
		if err := s.afterStart(ctx, tenantID, rec); err != nil {
			s.logger.Warn("verification start's bookkeeping left to the reconciler", "action", rec.ID, "error", err)
		}
	}
	if !s.later(ctx, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		after(ctx)
	}) {
		after(context.WithoutCancel(ctx))
	}
}

// afterStart is what follows a verification's start, the mark last: the
// earlier verifications on its subject told (a new action on a subject
// ends their effect window), the tenant's poller running when it has
// connectors, the action marked started.
func (s *Actions) afterStart(ctx context.Context, tenantID string, rec commitlayer.ActionRecord) error {
	if err := s.wakeReaching(ctx, tenantID, []commitlayer.Subject{rec.Subject}, 0, nil, rec.ID); err != nil {
		s.logger.Warn("tell earlier verifications of a new action", "action", rec.ID, "error", err)
	}
	conns, err := s.store.ListConnectors(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("list connectors of %s: %w", tenantID, err)
	}
	if len(conns) > 0 {
		if err := s.verifier.EnsurePoller(ctx, tenantID); err != nil {
			return err
		}
	}
	return s.store.VerificationStarted(ctx, tenantID, rec.ID)
}

// Recheck forces a re-verification of a recorded action now and returns
// its new verdict. Errors: ErrNotStarted for an action whose start was
// refused for good; one wrapping commitlayer.ErrUnavailable when Temporal
// is away; verify.ErrNotRunning (wrapped) when its watch is over.
func (s *Actions) Recheck(ctx context.Context, tenantID string, rec commitlayer.ActionRecord) (commitlayer.Verdict, error) {
	switch {
	case s.verifier == nil:
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w: verification is not enabled", rec.ID, commitlayer.ErrUnavailable)
	case !rec.VerificationFailedAt.IsZero():
		return commitlayer.Verdict{}, ErrNotStarted
	case s.away():
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w: temporal did not answer moments ago", rec.ID, commitlayer.ErrUnavailable)
	}
	v, err := s.verifier.Recheck(ctx, tenantID, rec.ID)
	if errors.Is(err, commitlayer.ErrUnavailable) {
		s.awayUntil.Store(s.now().Add(awayFor).UnixNano())
	}
	return v, err
}

// ErrNotStarted is a recheck of an action whose verification Temporal
// refused for good.
var ErrNotStarted = errors.New("the verification was never started")

// verifying is the part of Actions that runs verifications.
type verifying struct {
	verifier  Verifier
	logger    *slog.Logger
	awayUntil atomic.Int64 // unix ns until which Temporal counts as away
	bg        chan struct{}
	// Kick, when set, asks the reconciler for a round now (a start left to
	// it).
	Kick func()
	// FirstVerdict, when set, answers a new action's first verdict beside
	// the start of its verification (activities.FirstVerdict), so that the
	// answer to POST /v1/actions finds it stored.
	FirstVerdict func(ctx context.Context, tenantID, actionID string) error
}
