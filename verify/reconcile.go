package verify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
)

// ReconcileStore is what the reconciler needs from the database.
type ReconcileStore interface {
	DeliverNotifications(ctx context.Context, limit int, deliver func(context.Context, commitlayer.FactNotification) error) (delivered, failed int, err error)
	PendingStarts(ctx context.Context, olderThan time.Duration, limit int) ([]commitlayer.ActionRecord, error)
	// StartDeferred puts a failed start back with its own backoff and
	// returns its attempts so far.
	// The backoff doubles from 1 s with each attempt, up to most.
	StartDeferred(ctx context.Context, tenantID, actionID string, most time.Duration, reason string) (int, error)
}

// Reconciler finishes later what was accepted while Temporal (or a worker)
// was away: it delivers the notices of new facts that the outbox still
// holds, and starts the verification of every action recorded without one.
// Both are idempotent (a signal re-runs a pass; a start of a verification
// that exists is a no-op), so every API and worker process may run one.
type Reconciler struct {
	Client *Client
	Store  ReconcileStore
	// Interval between rounds; zero means 1 s. Kick runs a round at once.
	Interval time.Duration
	// StartAfter leaves a new action to the request that recorded it for
	// this long before the reconciler starts it; zero means 2 s.
	StartAfter time.Duration
	// StartTimeout bounds one start; zero means deliverTimeout.
	StartTimeout time.Duration
	Logger       *slog.Logger

	kick chan struct{}
	mu   sync.Mutex
	away bool // the last start found Temporal away (logged once)
}

// reconcileBatch bounds the notices and starts of one round.
const reconcileBatch = 50

// deliverTimeout bounds one delivery or start: a Temporal that does not
// answer fails the round fast, and the next round tries again.
const deliverTimeout = 5 * time.Second

// Backoffs of a failed start, doubling from 1 s: a start that found
// Temporal away waits at most awayBackoff (it is not its fault: it goes
// as soon as Temporal is back); one that failed for another reason (its
// own fault, perhaps) at most otherBackoff, so it cannot crowd the others.
const (
	awayBackoff  = 10 * time.Second
	otherBackoff = 5 * time.Minute
)

// NewReconciler returns a reconciler; Run it in a goroutine.
func NewReconciler(c *Client, store ReconcileStore, logger *slog.Logger) *Reconciler {
	if logger == nil {
		logger = slog.Default()
	}
	return &Reconciler{Client: c, Store: store, Logger: logger, kick: make(chan struct{}, 1)}
}

// Kick asks for a round now (after a failed delivery or start).
func (r *Reconciler) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run reconciles until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	every := r.Interval
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
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

// Round delivers the due notices and starts the pending actions once. It
// reports what it did; errors are logged, and the next round retries.
func (r *Reconciler) Round(ctx context.Context) (delivered, started int) {
	delivered, failed, err := r.Store.DeliverNotifications(ctx, reconcileBatch,
		func(ctx context.Context, n commitlayer.FactNotification) error {
			dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
			defer cancel()
			return r.Client.NotifyFacts(dctx, n.TenantID, n.Subjects, nil, n.ExceptActionID)
		})
	if err != nil && ctx.Err() == nil {
		r.Logger.Warn("reconcile: deliver fact notices", "error", err)
	}
	if failed > 0 {
		r.Logger.Warn("reconcile: fact notices not delivered yet", "failed", failed, "delivered", delivered)
	}
	after := r.StartAfter
	if after <= 0 {
		after = 2 * time.Second
	}
	pending, err := r.Store.PendingStarts(ctx, after, reconcileBatch)
	if err != nil {
		if ctx.Err() == nil {
			r.Logger.Warn("reconcile: pending starts", "error", err)
		}
		return delivered, 0
	}
	timeout := r.StartTimeout
	if timeout <= 0 {
		timeout = deliverTimeout
	}
	for _, a := range pending {
		if ctx.Err() != nil {
			break
		}
		sctx, cancel := context.WithTimeout(ctx, timeout)
		err := r.Client.Start(sctx, a.TenantID, a)
		cancel()
		if err == nil {
			started++
			r.setAway(false, nil)
			continue
		}
		if ctx.Err() != nil {
			break
		}
		var refused *StartRefusedError
		if errors.As(err, &refused) {
			// Marked failed: it leaves the queue, so this is logged once.
			r.Logger.Warn("reconcile: verification start refused for good; marked failed",
				"tenant", a.TenantID, "action", a.ID, "reason", refused.Reason)
			continue
		}
		most := otherBackoff
		if classify(err) == faultAway {
			most = awayBackoff
		}
		attempts, derr := r.Store.StartDeferred(ctx, a.TenantID, a.ID, most, err.Error())
		if derr != nil {
			r.Logger.Warn("reconcile: defer start", "tenant", a.TenantID, "action", a.ID, "error", derr)
			break // the database is away too
		}
		if most == awayBackoff {
			// Temporal is away for every start alike: the rest wait
			// for the next round.
			r.setAway(true, err)
			break
		}
		if attempts&(attempts-1) == 0 { // the 1st, 2nd, 4th, 8th… failure
			r.Logger.Warn("reconcile: start verification", "tenant", a.TenantID, "action", a.ID,
				"attempts", attempts, "error", err)
		}
	}
	if started > 0 {
		r.Logger.Info("reconcile: started pending verifications", "started", started)
	}
	return delivered, started
}

// setAway records whether Temporal is away, logging each change once (not
// once a round).
func (r *Reconciler) setAway(away bool, err error) {
	r.mu.Lock()
	changed := r.away != away
	r.away = away
	r.mu.Unlock()
	switch {
	case changed && away:
		r.Logger.Warn("reconcile: Temporal is away; pending verification starts wait for it", "error", err)
	case changed:
		r.Logger.Info("reconcile: Temporal answers again; starting pending verifications")
	}
}
