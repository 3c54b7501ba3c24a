package activities

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
)

// MetricPassPulls counts passes' pulls by outcome: "pulled" (started one),
// "joined" (shared another's, in flight or queued), "skipped" (a complete pull
// started since it asked). On /metrics: commitlayer_verify_pass_pulls_total.
const MetricPassPulls = "commitlayer_verify_pass_pulls_total"

// pullRunTimeout bounds one shared pull: a pass's pull has 2 minutes.
const pullRunTimeout = 2 * time.Minute

// pullCoalescer shares one tenant's pulls between the passes that want them at
// about the same time: per tenant at most one pull in flight, one queued.
//
// A pass is covered by a pull started at or after its FreshAsOf: a complete
// one already done (every connector read to its end) lets it skip; one in
// flight is waited on; otherwise it joins (or queues) the queued pull, which
// starts after the one in flight. This compares the worker's clock with
// Temporal's, assumed in sync as for every timer. A shared pull's notice spares
// only its leader: joiners run one more pass that finds nothing new, never a
// missed fact.
type pullCoalescer struct {
	mu      sync.Mutex
	tenants map[string]*tenantPulls

	pulled, joined, skipped atomic.Int64 // MetricPassPulls, in this process
}

type tenantPulls struct {
	// covered is the start of the latest complete pull.
	covered time.Time
	running *pullRun
	queued  *pullRun
}

// pullRun is one pull shared by the passes waiting on it.
type pullRun struct {
	ctx     context.Context // the starting pass's, detached from its cancellation
	leader  string          // the action of the pass that started it: not notified
	started time.Time       // set when it starts (a queued run has not)
	done    chan struct{}   // closed once out is set
	out     pullOutcome
}

// record notes that a pull started at began ended with out. It takes c.mu.
func (c *pullCoalescer) record(tenantID string, began time.Time, out pullOutcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cover(c.tenant(tenantID), began, out)
}

func (c *pullCoalescer) cover(t *tenantPulls, began time.Time, out pullOutcome) {
	if out.err == nil && out.complete && t.covered.Before(began) {
		t.covered = began
	}
}

// tenant returns the tenant's state; the caller holds c.mu. Past 4096 tenants,
// idle ones covered over a minute ago are forgotten (later passes need newer).
func (c *pullCoalescer) tenant(id string) *tenantPulls {
	if c.tenants == nil {
		c.tenants = map[string]*tenantPulls{}
	}
	t := c.tenants[id]
	if t == nil {
		if len(c.tenants) >= 4096 {
			old := time.Now().Add(-time.Minute)
			maps.DeleteFunc(c.tenants, func(_ string, t *tenantPulls) bool {
				return t.running == nil && t.queued == nil && t.covered.Before(old)
			})
		}
		t = &tenantPulls{}
		c.tenants[id] = t
	}
	return t
}

// extract answers a pass's pull: skipped, joined or started.
func (c *pullCoalescer) extract(ctx context.Context, a *Activities, in ExtractInput) (ExtractResult, error) {
	c.mu.Lock()
	t := c.tenant(in.TenantID)
	if !t.covered.IsZero() && !t.covered.Before(in.FreshAsOf) {
		covered := t.covered
		c.mu.Unlock()
		c.count(ctx, "skipped")
		return ExtractResult{Unreachable: map[string]string{}, StartedAt: covered}, nil
	}
	run, outcome := t.running, "joined"
	switch {
	case run != nil && !run.started.Before(in.FreshAsOf):
	case run != nil:
		if t.queued == nil {
			t.queued, outcome = newPullRun(ctx, in.ActionID), "pulled"
		}
		run = t.queued
	default:
		run, outcome = newPullRun(ctx, in.ActionID), "pulled"
		run.started = time.Now()
		t.running = run
		go c.exec(a, in.TenantID, run)
	}
	c.mu.Unlock()
	c.count(ctx, outcome)
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
	res.Subjects = slices.Clone(res.Subjects)
	res.StartedAt = run.started // set before done closed
	return res, nil
}

func newPullRun(ctx context.Context, leader string) *pullRun {
	// Detached from the starting pass: it must not heartbeat its activity.
	ctx = context.WithValue(context.WithoutCancel(ctx), sharedPullKey{}, true)
	return &pullRun{ctx: ctx, leader: leader, done: make(chan struct{})}
}

type sharedPullKey struct{}

// heartbeats reports whether a pull on ctx may heartbeat (never a shared one).
func heartbeats(ctx context.Context) bool {
	shared, _ := ctx.Value(sharedPullKey{}).(bool)
	return !shared && activity.IsActivity(ctx) && !activity.GetInfo(ctx).IsLocalActivity
}

// exec runs the tenant's pulls, run first, then each one queued behind it.
func (c *pullCoalescer) exec(a *Activities, tenantID string, run *pullRun) {
	for run != nil {
		ctx, cancel := context.WithTimeout(run.ctx, pullRunTimeout)
		out := a.pullTenant(ctx, tenantID, run.leader)
		cancel()
		c.mu.Lock()
		t := c.tenant(tenantID)
		c.cover(t, run.started, out)
		run.out = out
		close(run.done)
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
	case "pulled":
		c.pulled.Add(1)
	case "joined":
		c.joined.Add(1)
	default:
		c.skipped.Add(1)
	}
	if activity.IsActivity(ctx) {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).Counter(MetricPassPulls).Inc(1)
	}
}
