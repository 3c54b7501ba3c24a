package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/postgres"
)

// Facts arriving are stored with a notice in the same transaction (the
// store's outbox), and the notice's insert wakes the reconciler of every
// process (postgres.DB.Listen). Whichever claims it signals the
// verifications watching the facts' subjects. One path, in one direction:
// store → reconciler → Temporal → workflow → pass.

// maxReach bounds how far a notice widens its subjects through links (a
// customer linked to every one of its orders).
const maxReach = 2000

// wake signals the verifications still watching any of the subjects, or a
// subject up to two links away from one (a refund on an order reaches the
// cancellation of its customer's subscription, which forbids refunds
// through the customer), except exceptActionID's, and returns once each is
// signalled. A verification whose latest verdict is settled (final, every
// source answered, its contract version, past settlement) stays asleep when
// digest (not nil) says the facts cannot change it (contracts'
// MayChange: none of a kind it reads, none linking, none in its policy's
// state).
func (s *Actions) wake(ctx context.Context, tenantID string, subjects []commitlayer.Subject, digest *contracts.Digest, exceptActionID string) error {
	return s.wakeReaching(ctx, tenantID, subjects, 2, digest, exceptActionID)
}

// wakeReaching is wake through hops links (2 for facts; 0 for a new action,
// whose subject's earlier actions of its contract are what it changes).
func (s *Actions) wakeReaching(ctx context.Context, tenantID string, subjects []commitlayer.Subject, hops int, digest *contracts.Digest, exceptActionID string) error {
	if len(subjects) == 0 || s.verifier == nil {
		return nil
	}
	all, frontier := subjects, subjects
	for range hops {
		if len(all) >= maxReach || len(frontier) == 0 {
			break
		}
		next, err := s.store.LinkedSubjects(ctx, tenantID, frontier)
		if err != nil {
			return fmt.Errorf("subjects linked to the new facts: %w", err)
		}
		seen := make(map[commitlayer.Subject]bool, len(all))
		for _, x := range all {
			seen[x] = true
		}
		frontier = nil
		for _, x := range next {
			if !seen[x] && len(all) < maxReach {
				all = append(all, x)
				frontier = append(frontier, x)
			}
		}
	}
	watched, err := s.store.WatchedActions(ctx, tenantID, all, s.now())
	if err != nil {
		return fmt.Errorf("watched actions of %s: %w", tenantID, err)
	}
	var quiet []string // those the facts cannot change, if settled
	targets := watched[:0]
	for _, a := range watched {
		switch {
		case a.ID == exceptActionID || !a.VerificationFailedAt.IsZero():
		case digest != nil && !s.mayChange(ctx, tenantID, a, digest):
			quiet = append(quiet, a.ID)
			targets = append(targets, a)
		default:
			targets = append(targets, a)
		}
	}
	if len(quiet) > 0 {
		heads, err := s.store.LatestVerdictHeads(ctx, tenantID, quiet)
		if err != nil {
			return fmt.Errorf("latest verdicts of %s: %w", tenantID, err)
		}
		now := s.now()
		n := 0
		for _, a := range targets {
			h, ok := heads[a.ID]
			settled := ok && !h.Provisional && h.Unavailable == 0 && h.ContractVersion == a.ContractVersion && !now.Before(a.SettlesAt)
			if !settled {
				targets[n] = a
				n++
			}
		}
		targets = targets[:n]
	}
	return s.verifier.Signal(ctx, tenantID, targets)
}

// mayChange reports whether facts like digest may change a's verdict (true
// when its contract cannot be had).
func (s *Actions) mayChange(ctx context.Context, tenantID string, a commitlayer.ActionRecord, digest *contracts.Digest) bool {
	_, c, err := s.contracts.Load(ctx, tenantID, a.Contract, a.ContractVersion)
	return err != nil || c.MayChange(digest, a.RequestedAt)
}

// Reconciler finishes what was accepted while Temporal (or a worker) was
// away, and delivers the notices of new facts: every API and worker
// process runs one. Both are idempotent.
type Reconciler struct {
	Actions *Actions
	// Interval between rounds; zero means 1 s. A notice written anywhere,
	// and Kick, run a round at once.
	Interval time.Duration
	// StartAfter leaves a new action to the request that recorded it for
	// this long before the reconciler starts it; zero means 2 s.
	StartAfter time.Duration

	kick chan struct{}
}

// NewReconciler returns a reconciler for a's store and verifier, kicked by
// a when a start is left to it; Run it.
func NewReconciler(a *Actions) *Reconciler {
	r := &Reconciler{Actions: a, kick: make(chan struct{}, 1)}
	a.Kick = r.Kick
	return r
}

// Kick asks for a round now.
func (r *Reconciler) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// batch bounds the notices and starts of one round.
const batch = 50

// deliverTimeout bounds one delivery or start: a Temporal that does not
// answer fails the round fast, and the next round tries again.
const deliverTimeout = 5 * time.Second

// Run reconciles until ctx ends: a round each Interval, at each notice
// written (when the store listens) and at each Kick.
func (r *Reconciler) Run(ctx context.Context, listen func(ctx context.Context, wake func())) {
	if listen != nil {
		go listen(ctx, r.Kick)
	}
	t := time.NewTicker(cmp.Or(r.Interval, time.Second))
	defer t.Stop()
	for {
		r.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}

// Round delivers the due notices and starts the pending actions once, and
// reports what it did; errors are logged, and the next round retries.
func (r *Reconciler) Round(ctx context.Context) (delivered, started int) {
	s := r.Actions
	for {
		n, failed, err := s.store.DeliverNotifications(ctx, batch, func(ctx context.Context, n postgres.Notice) error {
			dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
			defer cancel()
			return s.wake(dctx, n.TenantID, n.Subjects, n.Digest, n.ExceptActionID)
		})
		delivered += n
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("reconcile: deliver notices of new facts", "error", err)
		}
		if failed > 0 {
			s.logger.Warn("reconcile: notices of new facts not delivered yet", "failed", failed, "delivered", n)
		}
		if err != nil || failed > 0 || n < batch {
			break
		}
	}
	pending, err := s.store.PendingStarts(ctx, cmp.Or(r.StartAfter, 2*time.Second), batch)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("reconcile: pending starts", "error", err)
		}
		return delivered, 0
	}
	for _, a := range pending {
		if ctx.Err() != nil || s.verifier == nil {
			break
		}
		sctx, cancel := context.WithTimeout(ctx, deliverTimeout)
		err := s.verifier.Start(sctx, a.TenantID, a)
		if err == nil {
			err = s.afterStart(sctx, a.TenantID, a)
		}
		cancel()
		var refused refusal
		switch {
		case err == nil:
			started++
			continue
		case ctx.Err() != nil:
			return delivered, started
		case errors.As(err, &refused):
			if _, err := s.store.StartFailed(ctx, a.TenantID, a.ID, refused.StartRefused()); err != nil {
				s.logger.Warn("reconcile: mark refused start", "action", a.ID, "error", err)
			}
			s.logger.Warn("reconcile: verification start refused for good; marked failed",
				"tenant", a.TenantID, "action", a.ID, "reason", refused.StartRefused())
			continue
		}
		// Temporal away (for every start alike: the rest wait for the next
		// round), or another failure, retried with a backoff of its own.
		away := errors.Is(err, commitlayer.ErrUnavailable)
		most := 5 * time.Minute
		if away {
			most = 10 * time.Second
		}
		attempts, derr := s.store.StartDeferred(ctx, a.TenantID, a.ID, most, err.Error())
		if derr != nil {
			s.logger.Warn("reconcile: defer start", "tenant", a.TenantID, "action", a.ID, "error", derr)
			break // the database is away too
		}
		if attempts&(attempts-1) == 0 { // the 1st, 2nd, 4th, 8th… failure
			s.logger.Warn("reconcile: start verification", "tenant", a.TenantID, "action", a.ID, "attempts", attempts, "error", err)
		}
		if away {
			break
		}
	}
	if started > 0 {
		s.logger.Info("reconcile: started pending verifications", "started", started)
	}
	return delivered, started
}
