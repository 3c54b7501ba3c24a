package verify

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/commitlayer/commitlayer"
)

// ReconcileStore is what the reconciler needs from the database.
type ReconcileStore interface {
	DeliverNotifications(ctx context.Context, limit int, deliver func(context.Context, commitlayer.FactNotification) error) (delivered, failed int, err error)
	PendingStarts(ctx context.Context, olderThan time.Duration, limit int) ([]commitlayer.ActionRecord, error)
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
	Logger     *slog.Logger

	kick chan struct{}
}

// reconcileBatch bounds the notices and starts of one round.
const reconcileBatch = 50

// deliverTimeout bounds one delivery or start: a Temporal that does not
// answer fails the round fast, and the next round tries again.
const deliverTimeout = 5 * time.Second

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
			return r.Client.NotifyFacts(dctx, n.TenantID, n.Subjects, n.ExceptActionID)
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
	for _, a := range pending {
		sctx, cancel := context.WithTimeout(ctx, deliverTimeout)
		err := r.Client.Start(sctx, a.TenantID, a)
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				r.Logger.Warn("reconcile: start verification", "tenant", a.TenantID, "action", a.ID, "error", err)
			}
			break // Temporal is away: the next round tries again
		}
		started++
	}
	if started > 0 {
		r.Logger.Info("reconcile: started pending verifications", "started", started)
	}
	return delivered, started
}
