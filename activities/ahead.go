package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/pull"
)

// pullAhead starts a tenant's pull before its connectors are listed.
//
// A pull lists the tenant's connectors (one round trip to the store), then
// asks each one's feed for what came after its cursor. The listing rarely
// says anything new: connectors are never changed once made (only added
// and removed), and their cursors move only with a pull, most often this
// process's own. So this process remembers, per tenant, the connectors its
// last pull listed and the cursor each was left at, and the next pull asks
// those feeds beside the listing. When the listing comes back, a feed's
// answer is kept when the listing has the same connector at the same
// cursor (the request it would have made, made earlier); otherwise it is
// dropped and the pull asks again, as it would have without it. The pull
// then waits for the longer of the listing and the feeds, not their sum.
//
// A dropped answer is a GET the pull did not need (a connector removed, or
// a cursor another process moved). After one, the tenant's pulls list
// first again for aheadOffFor: a tenant pulled by several processes in
// turn does not pay a wasted request per pull.
type pullAhead struct {
	mu      sync.Mutex
	tenants map[string]*aheadTenant

	hits, misses atomic.Int64
}

// aheadTenant is what the last pull of one tenant left.
type aheadTenant struct {
	conns    []commitlayer.Connector // each with the cursor the pull left it at
	at       time.Time
	offUntil time.Time // after a dropped answer
}

const (
	// aheadOffFor is how long a tenant's pulls list first after one of
	// them dropped an answer asked ahead.
	aheadOffFor = time.Minute
	// aheadMaxAge: a tenant's connectors remembered longer ago than this
	// are not asked ahead (the next pull lists first and remembers anew).
	aheadMaxAge = 10 * time.Minute
	// aheadMaxTenants bounds what is remembered; past it the entries of
	// tenants not pulled for a minute are forgotten.
	aheadMaxTenants = 4096
)

// MetricPullAhead counts the feed answers asked for beside the listing
// (pullAhead) by what the pull did with them: outcome="kept" or "dropped".
// On /metrics: commitlayer_pull_ahead_total.
const MetricPullAhead = "commitlayer_pull_ahead_total"

// AheadStats counts, in this process, the feed answers asked for before
// the listing that the pull kept (Hits) and dropped (Misses).
type AheadStats struct{ Hits, Misses int64 }

// PullAheadStats returns a's counts (a function, not a method: every
// exported method of Activities is an activity).
func PullAheadStats(a *Activities) AheadStats {
	return AheadStats{Hits: a.ahead.hits.Load(), Misses: a.ahead.misses.Load()}
}

// aheadPull is one feed's first page asked for before the listing.
type aheadPull struct {
	conn   commitlayer.Connector
	puller pull.Puller
	cancel context.CancelFunc
	done   chan struct{}
	page   commitlayer.FactPage
	err    error
}

// wait returns the answer (its request's context is released then).
func (p *aheadPull) wait() (commitlayer.FactPage, error) {
	<-p.done
	p.cancel()
	return p.page, p.err
}

// aheadSet is one pull's answers asked ahead, by connector id.
type aheadSet struct {
	pulls map[string]*aheadPull
	// whole: every connector the tenant's last pull left was asked (none
	// failed to open), and there was at least one.
	whole bool
}

// start asks ahead, on ctx (the pull's, carrying its tenant), the feeds
// the tenant's last pull left, unless that was too long ago or asking
// ahead is off for the tenant. open opens a connector's puller.
func (p *pullAhead) start(ctx context.Context, tenantID string, open func(commitlayer.Connector) (pull.Puller, error)) *aheadSet {
	p.mu.Lock()
	t := p.tenants[tenantID]
	var conns []commitlayer.Connector
	if now := time.Now(); t != nil && now.Sub(t.at) <= aheadMaxAge && !now.Before(t.offUntil) {
		conns = t.conns
	}
	p.mu.Unlock()
	set := &aheadSet{whole: len(conns) > 0}
	for _, c := range conns {
		puller, err := open(c)
		if err != nil {
			set.whole = false
			continue // the pull opens it again and reports the error
		}
		actx, cancel := context.WithCancel(ctx)
		ap := &aheadPull{conn: c, puller: puller, cancel: cancel, done: make(chan struct{})}
		if set.pulls == nil {
			set.pulls = make(map[string]*aheadPull, len(conns))
		}
		set.pulls[c.ID] = ap
		go func() {
			defer close(ap.done)
			ap.page, ap.err = puller.Pull(actx, c.Source, c.Cursor)
		}()
	}
	return set
}

// take returns the answer asked ahead for c when it was asked with c's
// cursor (the request the pull would make now), or nil. A taken answer is
// the pull's: drop leaves it alone.
func (s *aheadSet) take(c commitlayer.Connector) *aheadPull {
	if s == nil {
		return nil
	}
	ap := s.pulls[c.ID]
	if ap == nil || ap.conn.Cursor != c.Cursor || ap.conn.Source != c.Source {
		return nil
	}
	delete(s.pulls, c.ID)
	return ap
}

// drop cancels the answers nobody took and returns how many there were.
func (s *aheadSet) drop() int {
	if s == nil {
		return 0
	}
	for _, ap := range s.pulls {
		ap.cancel()
	}
	n := len(s.pulls)
	s.pulls = nil
	return n
}

// done records how a pull of the tenant went: kept and dropped answers,
// and the connectors it listed with the cursor each was left at (a
// connector whose pull failed is left out: where its cursor is, only the
// next listing knows).
func (p *pullAhead) done(ctx context.Context, tenantID string, listed []commitlayer.Connector, results []connectorPull, kept, dropped int) {
	p.hits.Add(int64(kept))
	p.misses.Add(int64(dropped))
	if activity.IsActivity(ctx) && kept+dropped > 0 {
		m := activity.GetMetricsHandler(ctx)
		if kept > 0 {
			m.WithTags(map[string]string{"outcome": "kept"}).Counter(MetricPullAhead).Inc(int64(kept))
		}
		if dropped > 0 {
			m.WithTags(map[string]string{"outcome": "dropped"}).Counter(MetricPullAhead).Inc(int64(dropped))
		}
	}
	conns := make([]commitlayer.Connector, 0, len(listed))
	for i, c := range listed {
		if results[i].err != nil || results[i].cursor == nil {
			continue
		}
		c.Cursor = *results[i].cursor
		conns = append(conns, c)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tenants == nil {
		p.tenants = map[string]*aheadTenant{}
	}
	t := p.tenants[tenantID]
	if t == nil {
		if len(p.tenants) >= aheadMaxTenants {
			p.prune(now)
		}
		t = &aheadTenant{}
		p.tenants[tenantID] = t
	}
	t.conns, t.at = conns, now
	if dropped > 0 {
		t.offUntil = now.Add(aheadOffFor)
	}
}

// prune forgets the tenants not pulled for a minute, or, when every one
// was, about half of them; the caller holds p.mu.
func (p *pullAhead) prune(now time.Time) {
	for id, t := range p.tenants {
		if now.Sub(t.at) > time.Minute {
			delete(p.tenants, id)
		}
	}
	for id := range p.tenants {
		if len(p.tenants) < aheadMaxTenants/2 {
			break
		}
		delete(p.tenants, id)
	}
}
