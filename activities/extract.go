package activities

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

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
	// a read that started when it called its listed hook (withListedHook:
	// once it listed the connectors, or at its start when it asked every
	// one ahead and the listing then confirmed them all) sees every fact a
	// read after it would. A pass that
	// skipped its pull is quiet too: the pull that covered it had stored
	// all it brought before the pass asked.
	quiet bool
}

type listedHookKey struct{}

// withListedHook returns ctx carrying hook, which the pull an Extract on it
// reads (its own, or the shared one it joins) calls once that pull has
// listed the tenant's connectors, each with its cursor: from then on a read
// of the store sees every fact those cursors stand for. (A pull that asks
// every connector ahead calls it at its start instead, and is quiet only if
// its listing then confirms every cursor: pullTenantThen.) A pass starts
// its reads then, beside the feeds' answers (Pass).
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
// are read, before any feed is asked; or at once, beside the listing, when
// every connector is asked ahead from where this process's last pull left
// it (pullAhead), and the pull is then quiet only if the listing confirms
// them all.
func (a *Activities) pullTenantThen(ctx context.Context, tenantID, exceptActionID string, listed func()) (pullOutcome, func(context.Context) error) {
	nothing := func(context.Context) error { return nil }
	// The feeds the tenant's last pull here left are asked beside the
	// listing (pullAhead); the listing says which answers to keep.
	pctx := withPullTenant(ctx, tenantID)
	ahead := a.ahead.start(pctx, tenantID, func(c commitlayer.Connector) (pull.Puller, error) {
		return a.openConnector(tenantID, c)
	})
	// When every connector the last pull left is asked ahead, the passes
	// waiting on this pull may start their reads now, beside the listing:
	// the facts each remembered cursor stands for were stored before that
	// pull ended (it remembers them after), so a read starting now sees
	// them. The pull is then quiet only if the listing confirms every
	// connector at its remembered cursor (and no feed has anything after
	// it); otherwise the passes read again after it.
	readEarly := ahead.whole && listed != nil
	if readEarly {
		listed()
		listed = nil
	}
	conns, err := a.Store.ListConnectors(ctx, tenantID)
	if err != nil {
		ahead.drop()
		return pullOutcome{err: fmt.Errorf("extract: list connectors: %w", err)}, nothing
	}
	if listed != nil {
		listed()
	}
	// Pull the connectors at once: each is a separate system.
	firsts := make([]*aheadPull, len(conns))
	kept := 0
	for i, c := range conns {
		if firsts[i] = ahead.take(c); firsts[i] != nil {
			kept++
		}
	}
	dropped := ahead.drop()
	results := a.pullConnectors(ctx, tenantID, conns, firsts)
	if err := ctx.Err(); err != nil {
		return pullOutcome{err: err}, nothing
	}
	a.ahead.done(ctx, tenantID, conns, results, kept, dropped)
	confirmed := kept == len(conns) && dropped == 0
	res := ExtractResult{Unreachable: map[string]string{}, quiet: !readEarly || confirmed}
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

// FactRefused is the class (GET /v1/sources, GET /v1/connectors) of a
// connector whose page holds a fact the store refuses to keep (a NUL in a
// text, a time out of range, a value no column holds).
const FactRefused = "fact refused"

// refusedPage is a page of a connector the store refused: the connector's
// failure, not the database's. The source counts as unreachable and its
// cursor stays; the tenant's other connectors and verifications go on.
type refusedPage struct{ err error }

func (e *refusedPage) Error() string      { return e.err.Error() }
func (e *refusedPage) Unwrap() error      { return e.err }
func (e *refusedPage) ErrorClass() string { return FactRefused }

// pageStoreError is the error of storing one of c's pages: refusedPage
// when the store refused what the page holds, storeError otherwise (the
// database failed: the whole pull fails and is retried).
func pageStoreError(c commitlayer.Connector, err error) error {
	err = fmt.Errorf("store pull of %s: %w", c.Source, err)
	if errors.Is(err, commitlayer.ErrInvalid) {
		return &refusedPage{err}
	}
	return &storeError{err}
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
