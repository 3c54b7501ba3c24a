package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/pull"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/postgres"
)

// ExtractInput asks for the tenant's connectors to be pulled.
type ExtractInput struct {
	TenantID string
	// ActionID is the verification asking: not notified of its own pull's facts.
	ActionID string
	// FreshAsOf is the workflow's clock when it scheduled the pass: set, any
	// pull started since covers it (shared, coalesce.go); zero, its own pull.
	FreshAsOf time.Time `json:",omitzero"`
}

// ExtractResult reports one pull of every connector of a tenant.
type ExtractResult struct {
	// Unreachable maps each source that could not be read to the reason; they
	// count as not connected for this verification.
	Unreachable map[string]string
	Inserted    int
	Duplicates  int
	Subjects    []commitlayer.Subject
	// Took is how long the pull took in the worker.
	Took time.Duration `json:",omitempty"`
	// StartedAt is when the pull the pass reads started; the next pass asks
	// for fresher facts (VerifyState.PulledAt), never its own earlier read.
	StartedAt time.Time `json:",omitzero"`
}

// MetricPullLatency is the histogram of passes' pulls:
// commitlayer_verify_pull_latency_seconds on /metrics.
const MetricPullLatency = "commitlayer_verify_pull_latency"

// Extract pulls every connector of the tenant from its cursor and stores the
// facts with their cursors and the watchers' notice in one transaction. A
// connector that cannot be read is recorded and reported unreachable, never
// skipped silently. A pass's pull (FreshAsOf set) is shared (coalesce.go).
func (a *Activities) Extract(ctx context.Context, in ExtractInput) (ExtractResult, error) {
	if in.TenantID == "" {
		return ExtractResult{}, nonRetryable("extract: tenant id is required")
	}
	began := time.Now()
	var (
		res ExtractResult
		err error
	)
	if in.FreshAsOf.IsZero() {
		out := a.pullTenant(ctx, in.TenantID, in.ActionID)
		a.pulls.record(in.TenantID, began, out)
		res, err = out.res, out.err
		res.StartedAt = began
	} else {
		res, err = a.pulls.extract(ctx, a, in)
	}
	if err != nil {
		return ExtractResult{}, err
	}
	res.Took = time.Since(began)
	if activity.IsActivity(ctx) {
		activity.GetMetricsHandler(ctx).Timer(MetricPullLatency).Record(res.Took)
	}
	return res, nil
}

// pullOutcome is what one pull of a tenant's connectors produced.
type pullOutcome struct {
	res ExtractResult
	// complete: every connector was read to its end.
	complete bool
	err      error
}

// pullTenant pulls every connector of the tenant once; the notice of the facts
// goes to every watcher except exceptActionID.
func (a *Activities) pullTenant(ctx context.Context, tenantID, exceptActionID string) pullOutcome {
	conns, err := a.Store.ListConnectors(ctx, tenantID)
	if err != nil {
		return pullOutcome{err: fmt.Errorf("extract: list connectors: %w", err)}
	}
	results := a.pullConnectors(ctx, tenantID, exceptActionID, conns)
	if err := ctx.Err(); err != nil {
		return pullOutcome{err: err}
	}
	res := ExtractResult{Unreachable: map[string]string{}}
	complete := true
	for i, c := range conns {
		r := results[i]
		if r.err != nil {
			var storeErr *storeError
			if errors.As(r.err, &storeErr) {
				return pullOutcome{err: r.err} // the database failed, not the connector: retry
			}
			// The tenant sees a short class, never network text that tells
			// internal ports apart; the server log keeps the detail.
			msg := netguard.Classify(r.err)
			res.Unreachable[c.Source] = msg
			complete = false
			if err := a.Store.RecordPullError(ctx, tenantID, c.ID, msg, a.now()); err != nil {
				return pullOutcome{err: fmt.Errorf("extract: record pull error for %s: %w", c.Source, err)}
			}
			a.logger(ctx).Warn("connector unreachable", "tenant", tenantID, "source", c.Source,
				"class", msg, "error", netguard.Redact(r.err))
			continue
		}
		complete = complete && r.drained
		res.Inserted += r.ins.Inserted
		res.Duplicates += r.ins.Duplicates
		res.Subjects = append(res.Subjects, r.ins.Subjects...)
	}
	slices.Sort(res.Subjects)
	res.Subjects = slices.Compact(res.Subjects)
	return pullOutcome{res: res, complete: complete}
}

// connectorPull is what one connector's pull brought.
type connectorPull struct {
	ins     commitlayer.InsertResult
	drained bool // the feed was read to its end
	err     error
}

// pullConnectors reads every feed's first page at once (each is a separate
// system), stores those with news in one transaction and records the others in
// one statement, then reads on each feed that has more, page by page.
func (a *Activities) pullConnectors(ctx context.Context, tenantID, except string, conns []commitlayer.Connector) []connectorPull {
	results := make([]connectorPull, len(conns))
	pullers := make([]pull.Puller, len(conns))
	pages := make([]commitlayer.FactPage, len(conns))
	parallel(len(conns), func(i int) {
		c := conns[i]
		if heartbeats(ctx) {
			activity.RecordHeartbeat(ctx, c.Source)
		}
		var err error
		if pullers[i], err = a.openConnector(tenantID, c); err != nil {
			results[i].err = fmt.Errorf("connector %s: %w", c.ID, err)
			return
		}
		if pages[i], err = pullers[i].Pull(ctx, c.Source, c.Cursor); err != nil {
			results[i].err = fmt.Errorf("pull %s: %w", c.Source, err)
		}
	})
	var (
		moved            []int // connectors whose first page is stored
		batch            []postgres.PulledPage
		emptyIDs, cursor []string
	)
	for i, c := range conns {
		switch {
		case results[i].err != nil:
		case len(pages[i].Facts) == 0 && pages[i].Next == c.Cursor:
			emptyIDs, cursor = append(emptyIDs, c.ID), append(cursor, c.Cursor)
			results[i].drained = true
		default:
			moved = append(moved, i)
			batch = append(batch, postgres.PulledPage{ConnectorID: c.ID, Facts: pages[i].Facts, Cursor: pages[i].Next})
		}
	}
	// The two records go to the store at once.
	var emptyErr, batchErr error
	var ins commitlayer.InsertResult
	parallel(2, func(k int) {
		switch {
		case k == 0 && len(emptyIDs) > 0:
			// Not updated: removed meanwhile, or a later pull recorded.
			_, emptyErr = a.Store.RecordEmptyPulls(ctx, tenantID, emptyIDs, cursor, a.now())
		case k == 1 && len(batch) > 0:
			ins, batchErr = a.Store.RecordPulls(ctx, tenantID, except, batch, a.now())
		}
	})
	if emptyErr != nil {
		for i := range results {
			results[i].err = &storeError{fmt.Errorf("extract: %w", emptyErr)}
		}
		return results
	}
	switch {
	case len(batch) == 0:
	case batchErr == nil:
		results[moved[0]].ins = ins // the batch's facts, counted once
	case errors.Is(batchErr, commitlayer.ErrUnavailable) || ctx.Err() != nil:
		for _, i := range moved {
			results[i].err = &storeError{fmt.Errorf("store pulls of %d connectors: %w", len(moved), batchErr)}
		}
	case len(moved) == 1:
		results[moved[0]].err = pageError(conns[moved[0]], batchErr)
	default:
		// A page the store refuses must not keep the others out: each on its
		// own, and the refused one fails its connector only.
		parallel(len(moved), func(k int) {
			i := moved[k]
			results[i].ins, results[i].err = a.recordPage(ctx, tenantID, except, conns[i], batch[k])
		})
	}
	parallel(len(moved), func(k int) {
		i := moved[k]
		if results[i].err != nil {
			return
		}
		if !pages[i].More || pages[i].Next == conns[i].Cursor {
			results[i].drained = true
			return
		}
		a.pullFeed(ctx, tenantID, except, conns[i], pullers[i], pages[i].Next, &results[i])
	})
	return results
}

// pullFeed reads one connector on from cursor, up to MaxPagesPerPull pages
// (or the connector's own bound, if lower) in all, storing each page with its
// cursor into out.
func (a *Activities) pullFeed(ctx context.Context, tenantID, except string, c commitlayer.Connector, puller pull.Puller, cursor string, out *connectorPull) {
	maxPages := a.MaxPagesPerPull
	if maxPages <= 0 {
		maxPages = 100
	}
	if b, ok := puller.(pull.PageBound); ok {
		maxPages = min(maxPages, b.MaxPages())
	}
	for range maxPages - 1 {
		if heartbeats(ctx) {
			activity.RecordHeartbeat(ctx, c.Source)
		}
		page, err := puller.Pull(ctx, c.Source, cursor)
		if err != nil {
			out.err = fmt.Errorf("pull %s: %w", c.Source, err)
			return
		}
		ins, err := a.recordPage(ctx, tenantID, except, c, postgres.PulledPage{ConnectorID: c.ID, Facts: page.Facts, Cursor: page.Next})
		if err != nil {
			out.err = err
			return
		}
		out.ins.Inserted += ins.Inserted
		out.ins.Duplicates += ins.Duplicates
		out.ins.Subjects = append(out.ins.Subjects, ins.Subjects...)
		if !page.More || page.Next == cursor {
			out.drained = true
			return
		}
		cursor = page.Next
	}
}

// recordPage stores one page of c with its cursor.
func (a *Activities) recordPage(ctx context.Context, tenantID, except string, c commitlayer.Connector, p postgres.PulledPage) (commitlayer.InsertResult, error) {
	ins, err := a.Store.RecordPulls(ctx, tenantID, except, []postgres.PulledPage{p}, a.now())
	if err != nil {
		return ins, pageError(c, err)
	}
	return ins, nil
}

// pageError is the failure to store a page of c: the connector's when the store
// refused its content, the database's otherwise.
func pageError(c commitlayer.Connector, err error) error {
	err = fmt.Errorf("store pull of %s: %w", c.Source, err)
	if errors.Is(err, commitlayer.ErrInvalid) {
		return &refusedPage{err}
	}
	return &storeError{err}
}

// openConnector opens the puller of one of the tenant's connectors, whose kind
// opens its own sealed secrets.
func (a *Activities) openConnector(tenantID string, c commitlayer.Connector) (pull.Puller, error) {
	hc := defaultHTTPClient
	if a.HTTPClient != nil {
		hc = a.HTTPClient
	}
	limit := a.PageLimit
	if limit <= 0 {
		limit = 1000
	}
	return pull.OpenConnector(tenantID, c, pull.Options{HTTP: hc, DialFunc: a.DialFunc, PageLimit: limit, Secrets: a.Secrets})
}

// storeError is the database failing during a pull: the whole pull is retried.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// FactRefused is the class (GET /v1/sources, /v1/connectors) of a connector
// whose page holds a fact the store refuses to keep.
const FactRefused = "fact refused"

// refusedPage is a page the store refused: the connector's failure, not the
// database's. The source counts as unreachable and its cursor stays.
type refusedPage struct{ err error }

func (e *refusedPage) Error() string      { return e.err.Error() }
func (e *refusedPage) Unwrap() error      { return e.err }
func (e *refusedPage) ErrorClass() string { return FactRefused }

// parallel runs f(0) … f(n-1) at once and waits for them all.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}
