package activities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"golang.org/x/sync/errgroup"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/service"
)

// PassInput asks for one verification pass: pull the tenant's connectors
// when Pull is set, then evaluate and store.
type PassInput struct {
	Pull     bool
	Extract  ExtractInput
	Evaluate EvaluateInput
}

// PassResult is a pass's outcome: the stored verdict and, when it pulled,
// the sources that could not be read.
type PassResult struct {
	Evaluate EvaluateResult
	// Pulled is set when the pass pulled; Unreachable is then that pull's.
	Pulled      bool
	Unreachable map[string]string `json:",omitempty"`
	// PulledAt is when the pull the pass read started (ExtractResult.StartedAt).
	PulledAt time.Time `json:",omitzero"`
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
	// PullTook is carried by histories recorded before the pass measured
	// itself; it is not read.
	PullTook time.Duration `json:",omitempty"`
	// Known is the version of the verdict the verification holds (0 before
	// its first): a stored verdict newer than it is news to the
	// verification even when this pass appended nothing, and
	// EvaluateResult.Webhooks says so.
	Known int `json:",omitempty"`
}

// EvaluateResult is the verdict stored for the pass.
type EvaluateResult struct {
	Verdict commitlayer.Verdict
	// Changed is false when the verdict said nothing new and no version was
	// added.
	Changed bool
	// Webhooks is set, with a verdict changed or newer than
	// EvaluateInput.Known, when the tenant has verdict webhooks: the
	// verification then queues the verdict's events (workflows/webhooks.go);
	// without any it schedules nothing.
	Webhooks bool `json:",omitempty"`
}

// MetricPassLatency is the histogram of verification passes as the worker
// measures them, from the pass's start (its pull, when it pulls) to its
// verdict stored: commitlayer_verify_pass_latency_seconds on /metrics,
// labelled pulled="true" for passes that pulled.
const MetricPassLatency = "commitlayer_verify_pass_latency"

// Pass is one verification pass, top to bottom:
//
//  1. pull: every connector of the tenant, from its cursor, the facts
//     stored with their cursors (extract.go; a pull the tenant's other
//     passes want at the same time is shared, coalesce.go) — meanwhile the
//     action and its compiled contract version are loaded (a pull changes
//     no action);
//  2. read: in one round trip what the contract reads — the facts about the
//     subject, the later and the prior actions, the tenant's coverage, the
//     latest verdict, whether the tenant has webhooks;
//  3. evaluate: the contract over what was read (contracts.Evaluate);
//  4. append: the verdict stored as a new version when its answer changed.
//
// It runs as a local activity in the verification's workflow task. A retry
// repeats the pull, which is idempotent (facts are unique per source and
// external id; cursors move with their facts), and the append, which adds
// nothing for an answer already stored.
func (a *Activities) Pass(ctx context.Context, in PassInput) (PassResult, error) {
	began := time.Now()
	e := in.Evaluate
	if e.TenantID == "" || e.ActionID == "" {
		return PassResult{}, nonRetryable("pass: tenant and action ids are required")
	}
	var (
		out PassResult
		act commitlayer.ActionRecord
		c   *contracts.Contract
	)
	g, gctx := errgroup.WithContext(ctx)
	if in.Pull {
		g.Go(func() error {
			ex, err := a.Extract(gctx, in.Extract)
			out.Pulled, out.Unreachable, out.PulledAt = true, ex.Unreachable, ex.StartedAt
			return err
		})
	}
	g.Go(func() (err error) {
		act, c, err = a.action(gctx, e.StoreID, e.TenantID, e.ActionID)
		return err
	})
	if err := g.Wait(); err != nil {
		return PassResult{}, err
	}
	if out.Pulled {
		e.Unreachable = out.Unreachable
	}
	read, err := a.read(ctx, e.TenantID, act, c)
	if err != nil {
		return PassResult{}, err
	}
	v := a.verdict(act, c, read, e.Unreachable, e.Provisional)
	stored, changed, err := a.Store.AppendVerdictOver(ctx, e.TenantID, v, read.Latest, time.Since(began))
	if err != nil {
		return PassResult{}, fmt.Errorf("pass: store verdict of %s: %w", e.ActionID, err)
	}
	news := changed || stored.Version != e.Known
	out.Evaluate = EvaluateResult{Verdict: stored, Changed: changed, Webhooks: news && read.Webhooks}
	if activity.IsActivity(ctx) {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"pulled": strconv.FormatBool(in.Pull)}).
			Timer(MetricPassLatency).Record(time.Since(began))
	}
	return out, nil
}

// verdict evaluates act's contract over what the pass read: provisional
// when asked, whatever the clock says (the settlement re-read has not
// happened yet).
func (a *Activities) verdict(act commitlayer.ActionRecord, c *contracts.Contract, read evidence, unreachable map[string]string, provisional bool) commitlayer.Verdict {
	v := c.Evaluate(contracts.Input{
		Action: act.Action, Facts: read.Facts, Prior: read.Prior, Later: read.Later,
		Coverage: contracts.Coverage{Connected: read.Connected, Unreachable: unreachable},
		Now:      a.now(),
	})
	v.ContractVersion = act.ContractVersion
	v.Provisional = v.Provisional || provisional
	return v
}

// FirstVerdict runs a new action's first pass beside the start of its
// verification, in the process that records it (service.Actions'
// FirstVerdict): the same read and evaluation as Pass, for a tenant without
// connectors (its first pass has nothing to pull), stored only as the
// action's first verdict (postgres AppendFirstVerdict: when the
// verification's own pass got there first, its answer stands). The
// verification's first pass still runs and evaluates again; the verdict
// stored here is news to it (EvaluateInput.Known), so it publishes it and
// queues its webhook events. A start Temporal refuses for good deletes it
// with the marking (postgres StartFailed). It answers at the start RPC's
// pace what the workflow would answer a few milliseconds after it
// (docs/benchmarks.md, "Speed-ups kept and removed"). A function, not a
// method: every exported method of Activities is an activity.
func FirstVerdict(ctx context.Context, a *Activities, tenantID, actionID string) error {
	began := time.Now()
	conns, err := a.Store.ListConnectors(ctx, tenantID)
	if err != nil || len(conns) > 0 {
		return err
	}
	act, c, err := a.action(ctx, "", tenantID, actionID)
	if err != nil {
		return err
	}
	read, err := a.read(ctx, tenantID, act, c)
	if err != nil {
		return err
	}
	return a.Store.AppendFirstVerdict(ctx, tenantID, a.verdict(act, c, read, nil, true), time.Since(began))
}

// Evaluate is a pass without a pull: the activity of verifications
// recorded before a pass was one activity (workflows/verify.go).
func (a *Activities) Evaluate(ctx context.Context, in EvaluateInput) (EvaluateResult, error) {
	res, err := a.Pass(ctx, PassInput{Evaluate: in})
	return res.Evaluate, err
}

// evidence is what a pass reads for the evaluation beside the action.
type evidence struct {
	Facts     []commitlayer.Fact
	Prior     []commitlayer.Action // the earlier actions the contract's limits count
	Later     []commitlayer.Action // the contract's later actions on the subject
	Connected []string
	Latest    *commitlayer.Verdict
	Webhooks  bool
}

// action loads the action and its compiled contract version, from the
// database the action was recorded in (storeID; empty: not checked).
func (a *Activities) action(ctx context.Context, storeID, tenantID, actionID string) (commitlayer.ActionRecord, *contracts.Contract, error) {
	if err := a.checkStore(ctx, storeID); err != nil {
		return commitlayer.ActionRecord{}, nil, err
	}
	act, err := a.Store.GetAction(ctx, tenantID, actionID)
	if errors.Is(err, commitlayer.ErrNotFound) {
		// The action was recorded before its verification started, so this
		// store must have it: a replica that lags, or a worker on another
		// database. Retried with backoff, and loud: nothing resolves it but
		// time or an operator.
		a.logger(ctx).Error("pass: action not found in this worker's database; retrying", "tenant", tenantID, "action", actionID)
		return act, nil, fmt.Errorf("pass: action %s not found (a lagging replica, or a worker on another database than the API's?)", actionID)
	} else if err != nil {
		return act, nil, fmt.Errorf("pass: load action %s: %w", actionID, err)
	}
	c, err := a.contract(ctx, tenantID, act.Contract, act.ContractVersion)
	return act, c, err
}

// read reads what the evaluation of act reads: in one round trip (the
// store's ReadPass) the facts about the subject, the later actions (they
// end this one's window), the prior actions of each limit, the connected
// sources, the latest verdict and whether the tenant has webhooks; then the
// facts of the subjects a `through` forbid or a limit's prior actions
// reach, when there are any.
func (a *Activities) read(ctx context.Context, tenantID string, act commitlayer.ActionRecord, c *contracts.Contract) (evidence, error) {
	var ev evidence
	req := postgres.PassReadRequest{ActionID: act.ID, Subject: act.Subject, Actions: []postgres.ActionQuery{{
		Contract: act.Contract, Subject: act.Subject, From: act.RequestedAt, To: act.WatchUntil, ExcludeID: act.ID,
	}}}
	for _, q := range c.PriorQueries(act.Action) {
		req.Actions = append(req.Actions, postgres.ActionQuery{Contract: act.Contract, Agent: q.Agent, Subject: q.Subject,
			From: q.From, To: q.To, ExcludeID: act.ID})
	}
	got, err := a.Store.ReadPass(ctx, tenantID, req)
	if err != nil {
		return ev, fmt.Errorf("pass: read facts, actions and coverage of %s: %w", act.ID, err)
	}
	ev = evidence{Facts: got.Facts, Later: orEmpty(got.Actions[0]), Connected: orEmpty(got.Connected), Latest: got.Latest, Webhooks: got.Webhooks}
	// The limits' queries answered in query order, each action once.
	ev.Prior = []commitlayer.Action{}
	seen := map[string]bool{}
	for _, acts := range got.Actions[1:] {
		for _, p := range acts {
			if !seen[p.ID] {
				seen[p.ID] = true
				ev.Prior = append(ev.Prior, p)
			}
		}
	}
	// Forbids that look through a related record (the subscription's
	// customer) read the facts one hop from it too, and limits the effects
	// of the prior actions: their subjects' facts. A fact given twice
	// counts once.
	more := c.ThroughSubjects(act.Action, ev.Facts)
	have := map[commitlayer.Subject]bool{act.Subject: true}
	for _, s := range more {
		have[s] = true
	}
	for _, p := range ev.Prior {
		if !have[p.Subject] {
			have[p.Subject] = true
			more = append(more, p.Subject)
		}
	}
	if len(more) > 0 {
		extra, err := a.Store.FactsAbout(ctx, tenantID, more)
		if err != nil {
			return ev, fmt.Errorf("pass: facts about %d related subjects: %w", len(more), err)
		}
		ev.Facts = append(ev.Facts, extra...)
	}
	ev.Facts = orEmpty(ev.Facts)
	return ev, nil
}

// orEmpty is s, or an empty slice for nil (what the engine reads as "read,
// and none").
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// checkStore fails (retryably, logged as an error) when want names a
// database other than this worker's.
func (a *Activities) checkStore(ctx context.Context, want string) error {
	if want == "" {
		return nil
	}
	a.identityMu.Lock()
	defer a.identityMu.Unlock()
	if a.identity == "" {
		id, err := a.Store.Identity(ctx)
		if err != nil {
			return fmt.Errorf("pass: store identity: %w", err)
		}
		a.identity = id
	}
	if a.identity != want {
		a.logger(ctx).Error("pass: this worker reads another database than the one the action was recorded in",
			"worker_store", a.identity, "action_store", want)
		return fmt.Errorf("pass: worker database %s is not the API's %s", a.identity, want)
	}
	return nil
}

// contract returns the compiled contract version through the process's
// loader (one bounded cache for the API and the worker).
func (a *Activities) contract(ctx context.Context, tenantID, id string, version int) (*contracts.Contract, error) {
	a.contractsOnce.Do(func() {
		if a.Contracts == nil {
			a.Contracts = service.NewContracts(a.Store, 0)
		}
	})
	_, c, err := a.Contracts.Load(ctx, tenantID, id, version)
	if errors.Is(err, commitlayer.ErrInvalid) {
		return nil, nonRetryable("pass: contract %s version %d: %v", id, version, err)
	} else if err != nil {
		return nil, fmt.Errorf("pass: %w", err)
	}
	return c, nil
}
