package activities

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/pull"
	"github.com/commitlayer/commitlayer/internal/netguard"
)

// ExtractInput asks for the tenant's connectors to be pulled.
type ExtractInput struct {
	TenantID string
	// ActionID is the verification asking; it is not notified of its own pull.
	ActionID string
	// FreshAsOf is the time the facts must be as fresh as: the workflow's
	// clock when it scheduled the pass. Set, a pull that started at or
	// after it covers the pass, and the tenant's passes share pulls
	// (pullCoalescer); zero, the pull is the pass's own.
	FreshAsOf time.Time `json:",omitzero"`
}

// ExtractResult reports one pull of every connector of a tenant.
type ExtractResult struct {
	// Unreachable maps each source whose connector could not be read to the
	// reason. Those sources count as not connected for this verification.
	Unreachable map[string]string
	Inserted    int
	Duplicates  int
	Subjects    []commitlayer.Subject
	// Took is how long the pull took in the worker; the workflow hands it
	// to the Evaluate of the same pass (EvaluateInput.PullTook).
	Took time.Duration `json:",omitempty"`
	// StartedAt is when the pull whose facts the pass reads started (its
	// own, the one it joined, or the one that covered it). The workflow
	// asks its next pass for facts fresher than that (VerifyState.PulledAt):
	// a verification's re-read is never answered by its own earlier read.
	StartedAt time.Time `json:",omitzero"`
	// quiet: the pull stored nothing (no connector's feed had anything
	// after its cursor, and none that failed had stored a page first), so
	// a read that started after it listed the connectors (a listed hook,
	// withListedHook) sees every fact a read after it would. A pass that
	// skipped its pull is quiet too: the pull that covered it had stored
	// all it brought before the pass asked.
	quiet bool
}

type listedHookKey struct{}

// withListedHook returns ctx carrying hook, which the pull an Extract on it
// reads (its own, or the shared one it joins) calls once that pull has
// listed the tenant's connectors, each with its cursor: from then on a read
// of the store sees every fact those cursors stand for. A pass starts its
// reads then, beside the feeds' answers (Pass).
func withListedHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, listedHookKey{}, hook)
}

func listedHook(ctx context.Context) func() {
	hook, _ := ctx.Value(listedHookKey{}).(func())
	return hook
}

// Extract pulls every connector of the tenant from its cursor, stores the
// facts (cursor and facts in one transaction) and tells open verifications
// about subjects that got new facts. A connector that cannot be read is
// recorded on the connector and reported as unreachable, never skipped
// silently. A pass's pull (FreshAsOf set) is shared with the other passes
// of the tenant that want one at the same time, or skipped when a pull
// that started after FreshAsOf has read every connector (pullCoalescer).
func (a *Activities) Extract(ctx context.Context, in ExtractInput) (ExtractResult, error) {
	if in.TenantID == "" {
		return ExtractResult{}, nonRetryable("extract: tenant id is required")
	}
	if !in.FreshAsOf.IsZero() {
		return a.pulls.extract(ctx, a, in)
	}
	began := time.Now()
	out := a.pullTenant(ctx, in.TenantID, in.ActionID, listedHook(ctx))
	a.pulls.recordDirect(in.TenantID, began, out)
	if out.err != nil {
		return ExtractResult{}, out.err
	}
	out.res.Took = time.Since(began)
	out.res.StartedAt = began
	recordPullLatency(ctx, out.res.Took)
	return out.res, nil
}

// pullTenant pulls every connector of the tenant once and notifies the
// open verifications whose subjects got facts, except exceptActionID.
// listed, when not nil, is called once the connectors are listed.
func (a *Activities) pullTenant(ctx context.Context, tenantID, exceptActionID string, listed func()) pullOutcome {
	out, finish := a.pullTenantThen(ctx, tenantID, exceptActionID, listed)
	if err := finish(ctx); err != nil && out.err == nil {
		return pullOutcome{err: err}
	}
	return out
}

// pullTenantThen is pullTenant in two parts: the pull, whose outcome the
// passes waiting for it read as soon as it returns, and the bookkeeping
// none of them reads, left to finish: the connectors whose feeds had
// nothing new are recorded (last pull time, error cleared) and the notices
// of new facts delivered to the other verifications. Neither changes what
// a pass reads: the facts and their notices are stored before it returns
// (an outbox the reconciler delivers from if finish never runs), and the
// empty pulls change no cursor. Run finish before the tenant's next pull,
// so that pull's records come after this one's. finish is never nil; its
// error is the empty pulls' record's (the notices' delivery only logs).
// listed, when not nil, is called once the connectors (and their cursors)
// are read, before any feed is asked.
func (a *Activities) pullTenantThen(ctx context.Context, tenantID, exceptActionID string, listed func()) (pullOutcome, func(context.Context) error) {
	nothing := func(context.Context) error { return nil }
	// The feeds the tenant's last pull here left are asked beside the
	// listing (pullAhead); the listing says which answers to keep.
	pctx := withPullTenant(ctx, tenantID)
	ahead := a.ahead.start(pctx, tenantID, func(c commitlayer.Connector) (pull.Puller, error) {
		return a.openConnector(tenantID, c)
	})
	conns, err := a.Store.ListConnectors(ctx, tenantID)
	if err != nil {
		ahead.drop()
		return pullOutcome{err: fmt.Errorf("extract: list connectors: %w", err)}, nothing
	}
	if listed != nil {
		listed()
	}
	// Pull the connectors at once: each is a separate system.
	results := make([]connectorPull, len(conns))
	kept := 0
	var wg sync.WaitGroup
	for i, c := range conns {
		first := ahead.take(c)
		if first != nil {
			kept++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = a.pullConnector(ctx, tenantID, c, first)
		}()
	}
	dropped := ahead.drop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return pullOutcome{err: err}, nothing
	}
	a.ahead.done(ctx, tenantID, conns, results, kept, dropped)
	res := ExtractResult{Unreachable: map[string]string{}, quiet: true}
	complete := true
	seen := map[commitlayer.Subject]bool{}
	var (
		notices []int64
		digest  digestSum
	)
	for i, c := range conns {
		ins, err := results[i].ins, results[i].err
		res.quiet = res.quiet && !results[i].stored
		if err != nil {
			var storeErr *storeError
			if errors.As(err, &storeErr) {
				return pullOutcome{err: err}, nothing // the database failed, not the connector: retry
			}
			// The tenant sees a short class (timeout, refused, http 503,
			// address not allowed, …), never network text that tells
			// internal ports apart; the server log keeps the detail.
			msg := netguard.Classify(err)
			res.Unreachable[c.Source] = msg
			complete = false
			if rerr := a.Store.RecordPullError(ctx, tenantID, c.ID, msg, a.now()); rerr != nil {
				return pullOutcome{err: fmt.Errorf("extract: record pull error for %s: %w", c.Source, rerr)}, nothing
			}
			a.logger(ctx).Warn("connector unreachable", "tenant", tenantID, "source", c.Source,
				"class", msg, "error", netguard.Redact(err))
			continue
		}
		complete = complete && results[i].drained
		res.Inserted += ins.Inserted
		res.Duplicates += ins.Duplicates
		digest.add(ins)
		notices = append(notices, results[i].notices...)
		for _, s := range ins.Subjects {
			seen[s] = true
		}
	}
	for s := range seen {
		res.Subjects = append(res.Subjects, s)
	}
	sort.Slice(res.Subjects, func(i, j int) bool { return res.Subjects[i] < res.Subjects[j] })
	at := a.now()
	finish := func(ctx context.Context) error {
		err := a.recordEmptyPulls(ctx, tenantID, conns, results, at)
		if a.Notify != nil && res.Inserted > 0 && len(res.Subjects) > 0 {
			a.deliverNotices(ctx, tenantID, res.Subjects, digest.digest(), exceptActionID, notices)
		}
		return err
	}
	return pullOutcome{res: res, complete: complete}, finish
}

// deliverNotices tells the open verifications of the tenant whose subjects
// got facts (except exceptActionID) and deletes the delivered notices. The
// facts were stored with their notices (an outbox): one Temporal does not
// take stays for the reconciler.
func (a *Activities) deliverNotices(ctx context.Context, tenantID string, subjects []commitlayer.Subject, digest *commitlayer.FactsDigest, exceptActionID string, notices []int64) {
	if err := a.Notify.NotifyFacts(ctx, tenantID, subjects, digest, exceptActionID); err != nil {
		a.logger(ctx).Warn("notice of new facts left to the reconciler", "tenant", tenantID, "error", err)
		return
	}
	for _, id := range notices {
		if err := a.Store.NotificationDelivered(ctx, id); err != nil {
			a.logger(ctx).Warn("delete delivered notice", "tenant", tenantID, "error", err)
		}
	}
}

type pullTenantKey struct{}

func withPullTenant(ctx context.Context, tenantID string) context.Context {
	return context.WithValue(ctx, pullTenantKey{}, tenantID)
}

// PullTenant is the tenant a connector pull's request is made for, read
// from the request's context by an HTTP transport (a per-tenant egress
// route, a label in a proxy's log; the sandbox's per-scenario chaos).
func PullTenant(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(pullTenantKey{}).(string)
	return id, ok && id != ""
}

type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// pullConnector reads one connector from its cursor until the feed has no
// more pages (bounded), storing each page with its cursor, except a first
// page with nothing new (connectorPull.empty): the tenant's pull records
// those together (recordEmptyPulls). It also returns the outbox notices its
// pages wrote, for Extract to delete once it has delivered them, and
// whether it read the feed to its end (not cut short by MaxPagesPerPull).
//
// first, when not nil, is the connector's first page asked for before the
// listing with the connector's cursor (pullAhead): the pull reads it
// instead of asking for it.
func (a *Activities) pullConnector(ctx context.Context, tenantID string, c commitlayer.Connector, first *aheadPull) connectorPull {
	// The pull's requests carry the tenant they are made for: a transport
	// may route or label them by tenant (PullTenant).
	ctx = withPullTenant(ctx, tenantID)
	var puller pull.Puller
	if first != nil {
		puller = first.puller
	} else {
		var err error
		if puller, err = a.openConnector(tenantID, c); err != nil {
			return connectorPull{err: fmt.Errorf("connector %s: %w", c.ID, err)}
		}
	}
	maxPages := a.MaxPagesPerPull
	if maxPages <= 0 {
		maxPages = 100
	}
	var out connectorPull
	cursor := c.Cursor
	subjects := map[commitlayer.Subject]bool{}
	var digest digestSum
	for range maxPages {
		if heartbeats(ctx) {
			activity.RecordHeartbeat(ctx, c.Source)
		}
		var (
			page commitlayer.FactPage
			err  error
		)
		if first != nil {
			page, err = first.wait()
			first = nil
		} else {
			page, err = puller.Pull(ctx, c.Source, cursor)
		}
		if err != nil {
			return connectorPull{notices: out.notices, stored: out.stored, err: fmt.Errorf("pull %s: %w", c.Source, err)}
		}
		if cursor == c.Cursor && len(page.Facts) == 0 && page.Next == cursor {
			return connectorPull{drained: true, empty: true, cursor: &c.Cursor}
		}
		ins, err := a.Store.RecordPull(ctx, tenantID, c.ID, page.Facts, page.Next, a.now())
		if err != nil {
			// A failed transaction stored nothing, but the database
			// failing fails the whole pull anyway.
			return connectorPull{notices: out.notices, stored: out.stored, err: &storeError{fmt.Errorf("store pull of %s: %w", c.Source, err)}}
		}
		out.stored = true
		out.ins.Inserted += ins.Inserted
		out.ins.Duplicates += ins.Duplicates
		digest.add(ins)
		if ins.NotificationID != 0 {
			out.notices = append(out.notices, ins.NotificationID)
		}
		for _, s := range ins.Subjects {
			subjects[s] = true
		}
		left := page.Next
		out.cursor = &left
		if !page.More || page.Next == cursor {
			out.drained = true
			break
		}
		cursor = page.Next
	}
	for s := range subjects {
		out.ins.Subjects = append(out.ins.Subjects, s)
	}
	out.ins.Digest = digest.digest()
	return out
}

// connectorPull is what one connector's pull brought.
type connectorPull struct {
	ins     commitlayer.InsertResult
	notices []int64
	drained bool
	// empty: the feed had nothing after the connector's cursor, and the
	// pull is not recorded yet (recordEmptyPulls records it).
	empty bool
	// stored: at least one page (facts or only a cursor's move) was
	// recorded.
	stored bool
	// cursor is where the pull left the connector's cursor (set when it
	// ended without an error).
	cursor *string
	err    error
}

// openConnector opens the puller of one of the tenant's connectors. The
// kind opens its own secrets (a Stripe key, a DSN's password, http_json
// headers), sealed at registration.
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

// recordEmptyPulls records the pulls that found nothing new in one
// statement (the common pull: a settlement's re-read of a quiet tenant)
// instead of one commit per connector. A connector it does not update was
// removed meanwhile, or another pull moved its cursor and recorded a later
// state than this one's: nothing is left to record for either.
func (a *Activities) recordEmptyPulls(ctx context.Context, tenantID string, conns []commitlayer.Connector, results []connectorPull, at time.Time) error {
	var ids, cursors []string
	for i, r := range results {
		if r.err == nil && r.empty {
			ids = append(ids, conns[i].ID)
			cursors = append(cursors, conns[i].Cursor)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	missed, err := a.Store.RecordEmptyPulls(ctx, tenantID, ids, cursors, at)
	if err != nil {
		return &storeError{fmt.Errorf("extract: %w", err)}
	}
	if len(missed) > 0 {
		a.logger(ctx).Debug("empty pulls superseded (connector removed or pulled again meanwhile)",
			"tenant", tenantID, "connectors", missed)
	}
	return nil
}

// digestSum joins the digests of the batches of one notice (theirs
// together): nil, not said, when a batch that stored facts said none.
type digestSum struct {
	d       *commitlayer.FactsDigest
	unknown bool
}

func (s *digestSum) add(ins commitlayer.InsertResult) {
	switch {
	case ins.Inserted == 0:
	case ins.Digest == nil:
		s.unknown = true
	default:
		s.d = s.d.Join(ins.Digest)
	}
}

func (s *digestSum) digest() *commitlayer.FactsDigest {
	if s.unknown {
		return nil
	}
	return s.d
}
