// Package activities holds CommitLayer's Temporal activities: pulling facts
// through a tenant's connectors, evaluating an action against its contract,
// and persisting verdicts. Activities are methods on Activities, which holds
// their dependencies; workflows call them through a nil *Activities.
//
// Every activity is idempotent: facts are unique per (tenant, source,
// external_id), connector cursors only move when their facts landed, and a
// verdict is appended only when it says something new.
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/pull"
	stripeconn "github.com/commitlayer/commitlayer/connectors/stripe"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/service"
)

// Store is what the activities need from the database; *postgres.DB has it
// (checked in the tests).
type Store interface {
	GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error)
	GetContract(ctx context.Context, tenantID, contractID string, version int) (commitlayer.ContractRecord, error)
	FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error)
	PriorActions(ctx context.Context, tenantID, contractID, agent string, subject commitlayer.Subject, from, to time.Time, excludeID string) ([]commitlayer.Action, error)
	ConnectedSources(ctx context.Context, tenantID string) ([]string, error)
	AppendVerdict(ctx context.Context, tenantID string, v commitlayer.Verdict) (commitlayer.Verdict, bool, error)
	ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error)
	RecordPull(ctx context.Context, tenantID, connectorID string, facts []commitlayer.Fact, cursor string, at time.Time) (commitlayer.InsertResult, error)
	RecordPullError(ctx context.Context, tenantID, connectorID string, msg string, at time.Time) error
	WatchedActions(ctx context.Context, tenantID string, subjects []commitlayer.Subject, now time.Time) ([]commitlayer.ActionRecord, error)
	CountWatchedActions(ctx context.Context, tenantID string, now time.Time) (int, error)
	EndWatch(ctx context.Context, tenantID, actionID string, at time.Time) error
	NotificationDelivered(ctx context.Context, id int64) error
	Identity(ctx context.Context) (string, error)
}

// Notifier tells open verifications that subjects got new facts.
type Notifier interface {
	NotifyFacts(ctx context.Context, tenantID string, subjects []commitlayer.Subject, exceptActionID string) error
}

// Activities holds the dependencies of every activity.
type Activities struct {
	Store  Store
	Notify Notifier // may be nil: nobody is told about pulled facts
	Logger *slog.Logger
	// HTTPClient pulls the connectors; nil means a client with a 30 s
	// timeout.
	HTTPClient *http.Client
	// TenantHTTPClient, when set, may give a tenant a client of its own
	// (nil: HTTPClient). Only the sandbox benchmark sets it, to put its
	// chaos transport between its tenants' connectors and its systems.
	TenantHTTPClient func(tenantID string) *http.Client
	// Secrets opens connectors' sealed credentials (COMMITLAYER_SECRETS_KEY);
	// nil: connectors that need one fail their pulls, reported on the source.
	Secrets *secrets.Box
	// DialFunc makes the database connections of postgres connectors (the
	// address rules); nil: a plain dialer.
	DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
	// Contracts loads compiled contracts (shared with the API in one
	// process); nil makes one on Store.
	// Now is the clock verdicts are evaluated at; nil means time.Now.
	Now func() time.Time
	// PageLimit bounds the events asked for per page; 0 means 1000.
	PageLimit int
	// MaxPagesPerPull bounds one pull of one connector; 0 means 100.
	MaxPagesPerPull int

	Contracts *service.Contracts

	contractsOnce sync.Once
	identityMu    sync.Mutex
	identity      string
}

var defaultHTTPClient = &http.Client{Timeout: 30 * time.Second}

// ErrInvalidInput marks errors that no retry can fix.
const ErrInvalidInput = "InvalidInput"

func nonRetryable(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidInput, err)
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Activities) logger(ctx context.Context) *slog.Logger {
	l := a.Logger
	if l == nil {
		l = slog.Default()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With("activity", info.ActivityType.Name, "workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt)
	}
	return l
}

// ExtractInput asks for the tenant's connectors to be pulled.
type ExtractInput struct {
	TenantID string
	// ActionID is the verification asking; it is not notified of its own pull.
	ActionID string
}

// ExtractResult reports one pull of every connector of a tenant.
type ExtractResult struct {
	// Unreachable maps each source whose connector could not be read to the
	// reason. Those sources count as not connected for this verification.
	Unreachable map[string]string
	Inserted    int
	Duplicates  int
	Subjects    []commitlayer.Subject
}

// Extract pulls every connector of the tenant from its cursor, stores the
// facts (cursor and facts in one transaction) and tells open verifications
// about subjects that got new facts. A connector that cannot be read is
// recorded on the connector and reported as unreachable, never skipped
// silently.
func (a *Activities) Extract(ctx context.Context, in ExtractInput) (ExtractResult, error) {
	if in.TenantID == "" {
		return ExtractResult{}, nonRetryable("extract: tenant id is required")
	}
	conns, err := a.Store.ListConnectors(ctx, in.TenantID)
	if err != nil {
		return ExtractResult{}, fmt.Errorf("extract: list connectors: %w", err)
	}
	// Pull the connectors at once: each is a separate system.
	type pulled struct {
		ins     commitlayer.InsertResult
		notices []int64
		err     error
	}
	results := make([]pulled, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ins, notices, err := a.pullConnector(ctx, in.TenantID, c)
			results[i] = pulled{ins, notices, err}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return ExtractResult{}, err
	}
	res := ExtractResult{Unreachable: map[string]string{}}
	seen := map[commitlayer.Subject]bool{}
	var notices []int64
	for i, c := range conns {
		ins, err := results[i].ins, results[i].err
		if err != nil {
			var storeErr *storeError
			if errors.As(err, &storeErr) {
				return ExtractResult{}, err // the database failed, not the connector: retry
			}
			// The tenant sees a short class (timeout, refused, http 503,
			// address not allowed, …), never network text that tells
			// internal ports apart; the server log keeps the detail.
			msg := netguard.Classify(err)
			res.Unreachable[c.Source] = msg
			if rerr := a.Store.RecordPullError(ctx, in.TenantID, c.ID, msg, a.now()); rerr != nil {
				return ExtractResult{}, fmt.Errorf("extract: record pull error for %s: %w", c.Source, rerr)
			}
			a.logger(ctx).Warn("connector unreachable", "tenant", in.TenantID, "source", c.Source,
				"class", msg, "error", netguard.Redact(err))
			continue
		}
		res.Inserted += ins.Inserted
		res.Duplicates += ins.Duplicates
		notices = append(notices, results[i].notices...)
		for _, s := range ins.Subjects {
			seen[s] = true
		}
	}
	for s := range seen {
		res.Subjects = append(res.Subjects, s)
	}
	sort.Slice(res.Subjects, func(i, j int) bool { return res.Subjects[i] < res.Subjects[j] })
	if a.Notify != nil && res.Inserted > 0 && len(res.Subjects) > 0 {
		// The facts were stored with their notices (an outbox): deliver
		// them now; one Temporal does not take stays for the reconciler.
		if err := a.Notify.NotifyFacts(ctx, in.TenantID, res.Subjects, in.ActionID); err != nil {
			a.logger(ctx).Warn("notice of new facts left to the reconciler", "tenant", in.TenantID, "error", err)
		} else {
			for _, id := range notices {
				if err := a.Store.NotificationDelivered(ctx, id); err != nil {
					a.logger(ctx).Warn("delete delivered notice", "tenant", in.TenantID, "error", err)
				}
			}
		}
	}
	return res, nil
}

type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// pullConnector reads one connector from its cursor until the feed has no
// more pages (bounded), storing each page with its cursor.
// It also returns the outbox notices its pages wrote, for Extract to delete
// once it has delivered them.
func (a *Activities) pullConnector(ctx context.Context, tenantID string, c commitlayer.Connector) (commitlayer.InsertResult, []int64, error) {
	var total commitlayer.InsertResult
	var notices []int64
	hc := defaultHTTPClient
	if a.HTTPClient != nil {
		hc = a.HTTPClient
	}
	if a.TenantHTTPClient != nil {
		if h := a.TenantHTTPClient(tenantID); h != nil {
			hc = h
		}
	}
	limit := a.PageLimit
	if limit <= 0 {
		limit = 1000
	}
	opts := pull.Options{HTTP: hc, DialFunc: a.DialFunc, PageLimit: limit}
	if c.Kind == pull.KindStripe {
		key, err := stripeconn.OpenKey(a.Secrets, tenantID, c.ID, c.Secret)
		if err != nil {
			return total, notices, fmt.Errorf("connector %s: %w", c.ID, err)
		}
		opts.Secret = key
	}
	puller, err := pull.Open(c.Kind, c.URL, c.Config, opts)
	if err != nil {
		return total, notices, fmt.Errorf("connector %s: %w", c.ID, err)
	}
	maxPages := a.MaxPagesPerPull
	if maxPages <= 0 {
		maxPages = 100
	}
	cursor := c.Cursor
	subjects := map[commitlayer.Subject]bool{}
	for range maxPages {
		if activity.IsActivity(ctx) && !activity.GetInfo(ctx).IsLocalActivity {
			activity.RecordHeartbeat(ctx, c.Source)
		}
		page, err := puller.Pull(ctx, c.Source, cursor)
		if err != nil {
			return total, notices, fmt.Errorf("pull %s: %w", c.Source, err)
		}
		ins, err := a.Store.RecordPull(ctx, tenantID, c.ID, page.Facts, page.Next, a.now())
		if err != nil {
			return total, notices, &storeError{fmt.Errorf("store pull of %s: %w", c.Source, err)}
		}
		total.Inserted += ins.Inserted
		total.Duplicates += ins.Duplicates
		if ins.NotificationID != 0 {
			notices = append(notices, ins.NotificationID)
		}
		for _, s := range ins.Subjects {
			subjects[s] = true
		}
		if !page.More || page.Next == cursor {
			break
		}
		cursor = page.Next
	}
	for s := range subjects {
		total.Subjects = append(total.Subjects, s)
	}
	return total, notices, nil
}

// EvaluateInput asks for one verification pass over stored facts.
type EvaluateInput struct {
	TenantID string
	ActionID string
	// StoreID is the identity of the database the action was recorded in
	// (empty in histories from before it was carried): a worker on another
	// database refuses the pass, loudly, and it is retried.
	StoreID string
	// Unreachable sources from the latest pull: not connected for this pass.
	Unreachable map[string]string
	// Provisional forces the verdict to be provisional (the settlement
	// re-read has not happened yet), whatever the clock says.
	Provisional bool
}

// EvaluateResult is the verdict stored for the pass.
type EvaluateResult struct {
	Verdict commitlayer.Verdict
	// Changed is false when the verdict said nothing new and no version was
	// added.
	Changed bool
}

// Evaluate loads the action, its contract version, the facts about its
// subject (and those needed for its limits) and the tenant's coverage,
// evaluates, and appends the verdict to the action's history when it
// changed.
func (a *Activities) Evaluate(ctx context.Context, in EvaluateInput) (EvaluateResult, error) {
	if in.TenantID == "" || in.ActionID == "" {
		return EvaluateResult{}, nonRetryable("evaluate: tenant and action ids are required")
	}
	if err := a.checkStore(ctx, in.StoreID); err != nil {
		return EvaluateResult{}, err
	}
	act, err := a.Store.GetAction(ctx, in.TenantID, in.ActionID)
	if errors.Is(err, commitlayer.ErrNotFound) {
		// The action was recorded before its verification started, so this
		// store must have it: a replica that lags, or a worker on another
		// database. Retried with backoff (the workflow's retry policy), and
		// loud: nothing resolves it but time or an operator.
		a.logger(ctx).Error("evaluate: action not found in this worker's database; retrying",
			"tenant", in.TenantID, "action", in.ActionID)
		return EvaluateResult{}, fmt.Errorf("evaluate: action %s not found (a lagging replica, or a worker on another database than the API's?)", in.ActionID)
	} else if err != nil {
		return EvaluateResult{}, fmt.Errorf("evaluate: load action %s: %w", in.ActionID, err)
	}
	c, err := a.contract(ctx, in.TenantID, act.Contract, act.ContractVersion)
	if err != nil {
		return EvaluateResult{}, err
	}
	input, err := a.evaluationInput(ctx, in, act, c)
	if err != nil {
		return EvaluateResult{}, err
	}
	v := c.Evaluate(input)
	v.ContractVersion = act.ContractVersion
	if in.Provisional {
		v.Provisional = true
	}
	stored, changed, err := a.Store.AppendVerdict(ctx, in.TenantID, v)
	if err != nil {
		return EvaluateResult{}, fmt.Errorf("evaluate: store verdict for %s: %w", in.ActionID, err)
	}
	return EvaluateResult{Verdict: stored, Changed: changed}, nil
}

// evaluationInput gathers what the engine needs for one action.
func (a *Activities) evaluationInput(ctx context.Context, in EvaluateInput, act commitlayer.ActionRecord, c *contracts.Contract) (contracts.Input, error) {
	facts, err := a.Store.FactsAbout(ctx, in.TenantID, []commitlayer.Subject{act.Subject})
	if err != nil {
		return contracts.Input{}, fmt.Errorf("evaluate: facts about %s: %w", act.Subject, err)
	}
	// Forbids that look through a related record (the subscription's
	// customer) need the facts one hop from it too; the engine counts a
	// fact given twice once.
	if subs := c.ThroughSubjects(act.Action, facts); len(subs) > 0 {
		extra, err := a.Store.FactsAbout(ctx, in.TenantID, subs)
		if err != nil {
			return contracts.Input{}, fmt.Errorf("evaluate: facts through %v: %w", subs, err)
		}
		facts = append(facts, extra...)
	}
	prior, err := a.priorActions(ctx, in.TenantID, act, c)
	if err != nil {
		return contracts.Input{}, err
	}
	if len(prior) > 0 {
		// Limits count the effects of earlier actions: bring their facts.
		seen := map[commitlayer.Subject]bool{act.Subject: true}
		var more []commitlayer.Subject
		for _, p := range prior {
			if !seen[p.Subject] {
				seen[p.Subject] = true
				more = append(more, p.Subject)
			}
		}
		if len(more) > 0 {
			extra, err := a.Store.FactsAbout(ctx, in.TenantID, more)
			if err != nil {
				return contracts.Input{}, fmt.Errorf("evaluate: facts of prior actions: %w", err)
			}
			facts = append(facts, extra...)
		}
	}
	// A later action of the contract on the subject ends this one's window.
	later, err := a.Store.PriorActions(ctx, in.TenantID, act.Contract, "", act.Subject, act.RequestedAt, act.WatchUntil, act.ID)
	if err != nil {
		return contracts.Input{}, fmt.Errorf("evaluate: later actions: %w", err)
	}
	connected, err := a.Store.ConnectedSources(ctx, in.TenantID)
	if err != nil {
		return contracts.Input{}, fmt.Errorf("evaluate: coverage: %w", err)
	}
	return contracts.Input{
		Action: act.Action,
		Facts:  facts,
		Prior:  prior,
		Later:  later,
		Coverage: contracts.Coverage{
			Connected:   connected,
			Unreachable: in.Unreachable,
		},
		Now: a.now(),
	}, nil
}

// priorActions loads the earlier actions the contract's limits count
// (contracts.PriorQueries says which).
func (a *Activities) priorActions(ctx context.Context, tenantID string, act commitlayer.ActionRecord, c *contracts.Contract) ([]commitlayer.Action, error) {
	var out []commitlayer.Action
	seen := map[string]bool{}
	for _, q := range c.PriorQueries(act.Action) {
		got, err := a.Store.PriorActions(ctx, tenantID, act.Contract, q.Agent, q.Subject, q.From, q.To, act.ID)
		if err != nil {
			return nil, fmt.Errorf("evaluate: prior actions for limit %s: %w", q.Limit, err)
		}
		for _, p := range got {
			if !seen[p.ID] {
				seen[p.ID] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// checkStore fails (retryably, logged as an error) when want names a
// database other than this worker's.
func (a *Activities) checkStore(ctx context.Context, want string) error {
	if want == "" {
		return nil
	}
	a.identityMu.Lock()
	have := a.identity
	if have == "" {
		id, err := a.Store.Identity(ctx)
		if err != nil {
			a.identityMu.Unlock()
			return fmt.Errorf("evaluate: store identity: %w", err)
		}
		a.identity, have = id, id
	}
	a.identityMu.Unlock()
	if have != want {
		a.logger(ctx).Error("evaluate: this worker reads another database than the one the action was recorded in",
			"worker_store", have, "action_store", want)
		return fmt.Errorf("evaluate: worker database %s is not the API's %s", have, want)
	}
	return nil
}

// contract returns the compiled contract version through the process's
// loader (one bounded cache for the API and the worker).
func (a *Activities) contract(ctx context.Context, tenantID, id string, version int) (*contracts.Contract, error) {
	_, c, err := a.loader().Load(ctx, tenantID, id, version)
	if errors.Is(err, commitlayer.ErrInvalid) {
		return nil, nonRetryable("evaluate: contract %s version %d: %v", id, version, err)
	} else if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	return c, nil
}

func (a *Activities) loader() *service.Contracts {
	a.contractsOnce.Do(func() {
		if a.Contracts == nil {
			a.Contracts = service.NewContracts(a.Store, 0)
		}
	})
	return a.Contracts
}

// OpenVerifications counts the tenant's actions whose watch has not ended.
func (a *Activities) OpenVerifications(ctx context.Context, tenantID string) (int, error) {
	n, err := a.Store.CountWatchedActions(ctx, tenantID, a.now())
	if err != nil {
		return 0, fmt.Errorf("count open verifications of %s: %w", tenantID, err)
	}
	return n, nil
}

// EndWatchInput ends an action's watch early (its verification was
// cancelled), so pollers and ingestion stop nudging it.
type EndWatchInput struct {
	TenantID string
	ActionID string
}

// EndWatch records that the action is no longer watched.
func (a *Activities) EndWatch(ctx context.Context, in EndWatchInput) error {
	if err := a.Store.EndWatch(ctx, in.TenantID, in.ActionID, a.now()); err != nil && !errors.Is(err, commitlayer.ErrNotFound) {
		return fmt.Errorf("end watch of %s: %w", in.ActionID, err)
	}
	return nil
}
