package activities

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/commitlayer/commitlayer"
)

// MetricPassPulls counts the pulls of verification passes by what each
// pass did about its pull: outcome="pulled" (it started a pull of the
// tenant's connectors), "joined" (it shared a pull another pass of the same
// tenant started, in flight or queued), "skipped" (a pull that started
// after the pass's FreshAsOf had already read every connector). On
// /metrics: commitlayer_verify_pass_pulls_total; pulls per pass is
// pulled ÷ the sum.
const MetricPassPulls = "commitlayer_verify_pass_pulls_total"

// Pull outcomes of a pass (the outcome label of MetricPassPulls).
const (
	PullPulled  = "pulled"
	PullJoined  = "joined"
	PullSkipped = "skipped"
)

// PullStats counts passes' pulls in this process (the figures of
// MetricPassPulls, for a benchmark to print).
type PullStats struct {
	Pulled, Joined, Skipped int64
}

// PassPullStats returns the pulls of a's passes since it was made (a
// function, not a method: every exported method of Activities is an
// activity).
func PassPullStats(a *Activities) PullStats {
	c := &a.pulls
	return PullStats{Pulled: c.pulled.Load(), Joined: c.joined.Load(), Skipped: c.skipped.Load()}
}

// pullRunTimeout bounds one shared pull: a pass's pull has 2 minutes.
const pullRunTimeout = 2 * time.Minute

// pullCoalescer shares the pulls of one tenant's connectors between the
// passes of its verifications that want them at about the same time (a
// burst of actions, bench verify): per tenant at most one pull is in
// flight and one queued behind it.
//
// A pass asks for facts as fresh as its FreshAsOf (the workflow's clock
// when it scheduled the pass). It is covered by a pull that started at or
// after FreshAsOf:
//   - one that already read every connector to its end (no source
//     unreachable, no connector cut short by MaxPagesPerPull): the pass
//     skips its pull; a pull with an unreachable source covers nobody
//     after it ended (the next pass tries the source again);
//   - one in flight: the pass waits for it and shares its result;
//   - otherwise the pass joins the queued pull (or queues it), which
//     starts when the one in flight ends, so after the pass arrived: all
//     the passes that arrive meanwhile share it.
//
// The comparison puts the worker's clock (the pull's start) beside
// Temporal's (FreshAsOf): the two are assumed in sync, as for every timer.
//
// Notices of new facts: a pull tells every open verification whose
// subjects got facts, except the pass that started the pull, which reads
// them in its own evaluation. The passes that joined are not excepted:
// they read the facts too (they evaluate after the pull stored them), so
// their notice costs one pass that finds nothing new, never a missed fact.
// Excepting them would need the notifier to take a set; a pass that skips
// was not known to the pull at all, and is told like any other.
type pullCoalescer struct {
	mu      sync.Mutex
	tenants map[string]*tenantPulls

	pulled, joined, skipped atomic.Int64
}

type tenantPulls struct {
	// covered is the start of the latest pull that read every connector
	// of the tenant to its end.
	covered time.Time
	running *pullRun
	queued  *pullRun
}

// pullRun is one pull shared by the passes waiting on it.
type pullRun struct {
	ctx     context.Context // the starting pass's, detached from its cancellation
	leader  string          // the action of the pass that started it: not notified
	started time.Time       // set when it starts (a queued run has not)
	listed  chan struct{}   // closed once it has listed the connectors
	done    chan struct{}   // closed once out is set
	out     pullOutcome
}

// whenListed calls hook once the run has listed the tenant's connectors
// (at once when it has), and never when it ends without (a failed listing)
// or ctx ends first.
func (r *pullRun) whenListed(ctx context.Context, hook func()) {
	select {
	case <-r.listed:
		hook()
		return
	default:
	}
	select {
	case <-r.listed:
		hook()
	case <-r.done:
	case <-ctx.Done():
	}
}

// pullOutcome is what one pull of a tenant's connectors produced.
type pullOutcome struct {
	res ExtractResult
	// complete: every connector was read to its end.
	complete bool
	err      error
}

// covers records that a pull which started at began ended with out.
// The caller holds c.mu.
func (t *tenantPulls) covers(began time.Time, out pullOutcome) {
	if out.err == nil && out.complete && t.covered.Before(began) {
		t.covered = began
	}
}

// tenant returns the tenant's state; the caller holds c.mu.
func (c *pullCoalescer) tenant(id string) *tenantPulls {
	if c.tenants == nil {
		c.tenants = map[string]*tenantPulls{}
	}
	t := c.tenants[id]
	if t == nil {
		if len(c.tenants) >= 4096 {
			c.prune()
		}
		t = &tenantPulls{}
		c.tenants[id] = t
	}
	return t
}

// prune forgets idle tenants whose coverage is old: a pass scheduled since
// would need a newer pull anyway (dropping coverage only costs a pull).
func (c *pullCoalescer) prune() {
	old := time.Now().Add(-time.Minute)
	for id, t := range c.tenants {
		if t.running == nil && t.queued == nil && t.covered.Before(old) {
			delete(c.tenants, id)
		}
	}
}

// recordDirect records a pull that did not go through the coalescer (the
// poller's, a pass without FreshAsOf): it covers the passes after it too.
func (c *pullCoalescer) recordDirect(tenantID string, began time.Time, out pullOutcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tenant(tenantID).covers(began, out)
}

// extract answers a pass's pull: skipped, joined or started (see
// pullCoalescer).
func (c *pullCoalescer) extract(ctx context.Context, a *Activities, in ExtractInput) (ExtractResult, error) {
	arrived := time.Now()
	c.mu.Lock()
	t := c.tenant(in.TenantID)
	if !t.covered.IsZero() && !t.covered.Before(in.FreshAsOf) {
		covered := t.covered
		c.mu.Unlock()
		c.count(ctx, PullSkipped)
		if hook := listedHook(ctx); hook != nil {
			hook() // the covering pull stored what it brought before now
		}
		return ExtractResult{Unreachable: map[string]string{}, StartedAt: covered, quiet: true}, nil
	}
	var run *pullRun
	outcome := PullJoined
	switch {
	case t.running != nil && !t.running.started.Before(in.FreshAsOf):
		run = t.running
	case t.running != nil:
		if t.queued == nil {
			t.queued = newPullRun(ctx, in.ActionID)
			outcome = PullPulled
		}
		run = t.queued
	default:
		run = newPullRun(ctx, in.ActionID)
		run.started = time.Now()
		t.running = run
		outcome = PullPulled
		go c.exec(a, in.TenantID, run)
	}
	c.mu.Unlock()
	c.count(ctx, outcome)
	if hook := listedHook(ctx); hook != nil {
		go run.whenListed(ctx, hook)
	}

	select {
	case <-run.done:
	case <-ctx.Done():
		return ExtractResult{}, ctx.Err() // the pull goes on for the others
	}
	if run.out.err != nil {
		return ExtractResult{}, run.out.err
	}
	res := run.out.res
	res.Unreachable = maps.Clone(res.Unreachable)
	res.Subjects = append([]commitlayer.Subject(nil), res.Subjects...)
	res.Took = time.Since(arrived)
	res.StartedAt = run.started // set before done closed
	recordPullLatency(ctx, res.Took)
	return res, nil
}

func newPullRun(ctx context.Context, leader string) *pullRun {
	// Detached from the starting pass, it outlives it: it must not
	// heartbeat that pass's activity (pullConnector).
	ctx = context.WithValue(context.WithoutCancel(ctx), sharedPullKey{}, true)
	return &pullRun{ctx: ctx, leader: leader, listed: make(chan struct{}), done: make(chan struct{})}
}

type sharedPullKey struct{}

// heartbeats reports whether a pull on ctx may heartbeat its activity: a
// remote activity's own pull, never a shared one.
func heartbeats(ctx context.Context) bool {
	shared, _ := ctx.Value(sharedPullKey{}).(bool)
	return !shared && activity.IsActivity(ctx) && !activity.GetInfo(ctx).IsLocalActivity
}

// exec runs the tenant's pulls, run first, then each one queued behind it.
func (c *pullCoalescer) exec(a *Activities, tenantID string, run *pullRun) {
	for run != nil {
		ctx, cancel := context.WithTimeout(run.ctx, pullRunTimeout)
		out, finish := a.pullTenantThen(ctx, tenantID, run.leader, func() { close(run.listed) })
		c.mu.Lock()
		t := c.tenant(tenantID)
		t.covers(run.started, out)
		run.out = out
		close(run.done)
		// The passes read the facts now; the bookkeeping they do not read
		// (empty pulls, other verifications' notices) is done meanwhile,
		// beside the tenant's next pull: neither waits for the other
		// (RecordEmptyPulls never records over a later pull's state).
		go func() {
			defer cancel()
			if err := finish(ctx); err != nil {
				a.logger(ctx).Warn("record empty pulls (the next pull records its own)", "tenant", tenantID, "error", err)
			}
		}()
		next := t.queued
		t.running, t.queued = next, nil
		if next != nil {
			next.started = time.Now()
		}
		c.mu.Unlock()
		run = next
	}
}

func (c *pullCoalescer) count(ctx context.Context, outcome string) {
	switch outcome {
	case PullPulled:
		c.pulled.Add(1)
	case PullJoined:
		c.joined.Add(1)
	case PullSkipped:
		c.skipped.Add(1)
	}
	if !activity.IsActivity(ctx) {
		return
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).
		Counter(MetricPassPulls).Inc(1)
}
