package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/service"
)

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
	// PullTook is how long the same pass's Extract took (zero when the pass
	// did not pull): it counts in the pass latency stored with the verdict.
	PullTook time.Duration `json:",omitempty"`
	// Known is the version of the verdict the verification holds (0 before
	// its first): a stored verdict newer than it is news to the
	// verification even when this pass appended nothing (an early pass,
	// EarlyPass, stored it), and EvaluateResult.Webhooks says so.
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

// Evaluate loads the action, its contract version, the facts about its
// subject (and those needed for its limits) and the tenant's coverage,
// evaluates, and appends the verdict to the action's history when it
// changed.
func (a *Activities) Evaluate(ctx context.Context, in EvaluateInput) (EvaluateResult, error) {
	return a.evaluate(ctx, in, passReads{})
}

// passReads are reads a pass started before its evaluation (Pass): the
// action's (nil: the store's GetAction, now), and the read of readPass
// when it is still good (nil: read now).
type passReads struct {
	getAction func() (commitlayer.ActionRecord, error)
	early     *earlyRead
}

// readPass is a.readPass, or the same read made earlier when there was
// one and it succeeded (it read the same action and contract version).
func (r passReads) readPass(ctx context.Context, a *Activities, in EvaluateInput, act commitlayer.ActionRecord, c *contracts.Contract) (*prefetched, *passRead, error) {
	if r.early != nil {
		if pre, read, err, ok := r.early.take(); ok && err == nil {
			return pre, read, nil
		}
	}
	return a.readPass(ctx, in, act, c)
}

// evaluate is Evaluate over the reads a pass started ahead (reads).
func (a *Activities) evaluate(ctx context.Context, in EvaluateInput, reads passReads) (EvaluateResult, error) {
	stored, changed, err := a.evaluateWith(ctx, in, nil, reads)
	if err != nil {
		return EvaluateResult{}, err
	}
	news := changed || stored.Version != in.Known
	return EvaluateResult{Verdict: stored, Changed: changed, Webhooks: news && a.hasWebhooks(ctx, in.TenantID)}, nil
}

// evaluateWith is Evaluate without the webhooks' question, the verdict
// stored by appendVerdict (nil: the store's AppendVerdict), over the reads
// a pass started ahead (reads): the verdict stored for the pass, and
// whether this pass appended it.
func (a *Activities) evaluateWith(ctx context.Context, in EvaluateInput,
	appendVerdict func(context.Context, string, commitlayer.Verdict) (commitlayer.Verdict, bool, error),
	reads passReads,
) (commitlayer.Verdict, bool, error) {
	if in.TenantID == "" || in.ActionID == "" {
		return commitlayer.Verdict{}, false, nonRetryable("evaluate: tenant and action ids are required")
	}
	began := time.Now()
	if err := a.checkStore(ctx, in.StoreID); err != nil {
		return commitlayer.Verdict{}, false, err
	}
	getAction := reads.getAction
	if getAction == nil {
		getAction = func() (commitlayer.ActionRecord, error) { return a.Store.GetAction(ctx, in.TenantID, in.ActionID) }
	}
	act, err := getAction()
	if errors.Is(err, commitlayer.ErrNotFound) {
		// The action was recorded before its verification started, so this
		// store must have it: a replica that lags, or a worker on another
		// database. Retried with backoff (the workflow's retry policy), and
		// loud: nothing resolves it but time or an operator.
		a.logger(ctx).Error("evaluate: action not found in this worker's database; retrying",
			"tenant", in.TenantID, "action", in.ActionID)
		return commitlayer.Verdict{}, false, fmt.Errorf("evaluate: action %s not found (a lagging replica, or a worker on another database than the API's?)", in.ActionID)
	} else if err != nil {
		return commitlayer.Verdict{}, false, fmt.Errorf("evaluate: load action %s: %w", in.ActionID, err)
	}
	c, err := a.contract(ctx, in.TenantID, act.Contract, act.ContractVersion)
	if err != nil {
		return commitlayer.Verdict{}, false, err
	}
	pre, read, err := reads.readPass(ctx, a, in, act, c)
	if err != nil {
		return commitlayer.Verdict{}, false, err
	}
	v, err := a.answer(ctx, in, act, c, pre)
	if err != nil {
		return commitlayer.Verdict{}, false, err
	}
	v.PassLatency = max(in.PullTook, 0) + time.Since(began)
	if appendVerdict == nil {
		appendVerdict = a.Store.AppendVerdict
		if read != nil {
			appendVerdict = read.append // compares with the verdict readPass read
		}
	}
	stored, changed, err := appendVerdict(ctx, in.TenantID, v)
	if err != nil {
		return commitlayer.Verdict{}, false, fmt.Errorf("evaluate: store verdict for %s: %w", in.ActionID, err)
	}
	recordPassLatency(ctx, max(in.PullTook, 0)+time.Since(began), in.PullTook > 0)
	if changed && !stored.Provisional && a.followsFinal(ctx, in.TenantID, stored, read) {
		// A final verdict changed. Wakes are screened against the latest
		// stored verdict (Screen): facts stored while this pass read,
		// whose screen saw the verdict before this one, woke nobody. Read
		// again so that this verdict counts them; past this point a
		// screen sees the verdict just stored. (The first final verdict
		// follows a provisional one, which no screen keeps anyone asleep
		// on: settlement needs no second read.)
		if stored, err = a.settle(ctx, in, act, c, stored); err != nil {
			return commitlayer.Verdict{}, false, err
		}
	}
	return stored, changed, nil
}

// passReader is a store that reads a pass's reads in one round trip
// (postgres.DB).
type passReader interface {
	ReadPass(ctx context.Context, tenantID string, r commitlayer.PassReadRequest) (commitlayer.PassRead, error)
	AppendVerdictOver(ctx context.Context, tenantID string, v commitlayer.Verdict, latest *commitlayer.Verdict) (commitlayer.Verdict, bool, error)
}

// readPass reads at once, when the store can (passReader), what
// evaluationInput would read one statement at a time (the facts about the
// action's subject, the later actions, the limits' prior actions, the
// connected sources) and the action's latest verdict: it returns them as
// prefetched, and an append that compares with that verdict instead of
// reading it again. Otherwise both are nil and the pass reads as before.
func (a *Activities) readPass(ctx context.Context, in EvaluateInput, act commitlayer.ActionRecord, c *contracts.Contract) (*prefetched, *passRead, error) {
	pr, ok := a.Store.(passReader)
	if !ok {
		return nil, nil, nil
	}
	queries := c.PriorQueries(act.Action)
	req := commitlayer.PassReadRequest{ActionID: act.ID, Subject: act.Subject,
		Actions: []commitlayer.ActionQuery{laterQuery(act)}}
	for _, q := range queries {
		req.Actions = append(req.Actions, commitlayer.ActionQuery{Contract: act.Contract, Agent: q.Agent, Subject: q.Subject,
			From: q.From, To: q.To, ExcludeID: act.ID})
	}
	got, err := pr.ReadPass(ctx, in.TenantID, req)
	if err != nil {
		return nil, nil, fmt.Errorf("evaluate: read facts, actions and coverage of %s: %w", act.ID, err)
	}
	facts := got.Facts
	if facts == nil {
		facts = []commitlayer.Fact{}
	}
	connected := got.Connected
	if connected == nil {
		connected = []string{}
	}
	later := got.Actions[0]
	if later == nil {
		later = []commitlayer.Action{}
	}
	pre := &prefetched{
		connected: connected,
		facts:     map[commitlayer.Subject][]commitlayer.Fact{act.Subject: facts},
		later:     later,
		prior:     mergePrior(got.Actions[1:]),
	}
	latest := got.Latest
	return pre, &passRead{latest: latest, append: func(ctx context.Context, tenantID string, v commitlayer.Verdict) (commitlayer.Verdict, bool, error) {
		return pr.AppendVerdictOver(ctx, tenantID, v, latest)
	}}, nil
}

// passRead is the verdict readPass read (nil: none) and the append that
// compares with it.
type passRead struct {
	latest *commitlayer.Verdict
	append func(context.Context, string, commitlayer.Verdict) (commitlayer.Verdict, bool, error)
}

// laterQuery is the query of the actions that end act's window: the
// contract's later actions on the subject, within the watch.
func laterQuery(act commitlayer.ActionRecord) commitlayer.ActionQuery {
	return commitlayer.ActionQuery{Contract: act.Contract, Subject: act.Subject, From: act.RequestedAt, To: act.WatchUntil, ExcludeID: act.ID}
}

// mergePrior joins the answers of the limits' queries as priorActions
// does: in query order, each action once. Not nil: read.
func mergePrior(answers [][]commitlayer.Action) []commitlayer.Action {
	out := []commitlayer.Action{}
	seen := map[string]bool{}
	for _, got := range answers {
		for _, p := range got {
			if !seen[p.ID] {
				seen[p.ID] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// followsFinal reports whether the verdict stored before v was final too
// (true when it cannot tell: a read too many costs less than a missed
// fact).
// When the pass read the verdict before v (read: v is the next version),
// that one tells, with no read.
func (a *Activities) followsFinal(ctx context.Context, tenantID string, v commitlayer.Verdict, read *passRead) bool {
	if v.Version <= 1 {
		return false
	}
	if read != nil && read.latest != nil && read.latest.Version == v.Version-1 {
		return !read.latest.Provisional
	}
	history, err := a.Store.VerdictHistory(ctx, tenantID, v.ActionID)
	if err != nil {
		return true
	}
	for _, h := range history {
		if h.Version == v.Version-1 {
			return !h.Provisional
		}
	}
	return true
}

// maxSettleReads bounds the re-reads after a changed final verdict: each
// one that changes the answer again stores it and reads once more.
const maxSettleReads = 4

// settle re-reads after a final verdict changed until a read says the same
// as the verdict stored last.
func (a *Activities) settle(ctx context.Context, in EvaluateInput, act commitlayer.ActionRecord, c *contracts.Contract, stored commitlayer.Verdict) (commitlayer.Verdict, error) {
	for range maxSettleReads {
		v, err := a.answer(ctx, in, act, c, nil)
		if err != nil {
			return stored, err
		}
		next, changed, err := a.Store.AppendVerdict(ctx, in.TenantID, v)
		if err != nil {
			return stored, fmt.Errorf("evaluate: store verdict for %s: %w", in.ActionID, err)
		}
		stored = next
		if !changed {
			return stored, nil
		}
	}
	a.logger(ctx).Warn("evaluate: the verdict kept changing while facts arrived; the next facts' notice re-checks it",
		"tenant", in.TenantID, "action", in.ActionID, "version", stored.Version)
	return stored, nil
}

// answer evaluates the action over the facts stored now (nothing stored).
func (a *Activities) answer(ctx context.Context, in EvaluateInput, act commitlayer.ActionRecord, c *contracts.Contract, pre *prefetched) (commitlayer.Verdict, error) {
	input, err := a.evaluationInput(ctx, in, act, c, pre)
	if err != nil {
		return commitlayer.Verdict{}, err
	}
	v := c.Evaluate(input)
	v.ContractVersion = act.ContractVersion
	if in.Provisional {
		v.Provisional = true
	}
	return v, nil
}

// evaluationInput gathers what the engine needs for one action.
// pre, when not nil, holds what a caller evaluating many actions at once
// read for all of them.
func (a *Activities) evaluationInput(ctx context.Context, in EvaluateInput, act commitlayer.ActionRecord, c *contracts.Contract, pre *prefetched) (contracts.Input, error) {
	var (
		facts []commitlayer.Fact
		err   error
	)
	if pre != nil && pre.facts != nil {
		facts = pre.facts[act.Subject]
	} else if facts, err = a.Store.FactsAbout(ctx, in.TenantID, []commitlayer.Subject{act.Subject}); err != nil {
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
	var prior []commitlayer.Action
	if pre != nil && pre.prior != nil {
		prior = pre.prior
	} else if prior, err = a.priorActions(ctx, in.TenantID, act, c); err != nil {
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
	var later []commitlayer.Action
	if pre != nil && pre.later != nil {
		later = pre.later
	} else if pre != nil && pre.actions != nil {
		later = laterActions(pre.actions, act)
	} else if later, err = a.Store.PriorActions(ctx, in.TenantID, act.Contract, "", act.Subject, act.RequestedAt, act.WatchUntil, act.ID); err != nil {
		return contracts.Input{}, fmt.Errorf("evaluate: later actions: %w", err)
	}
	var connected []string
	if pre != nil && pre.connected != nil {
		connected = pre.connected
	} else if connected, err = a.Store.ConnectedSources(ctx, in.TenantID); err != nil {
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

// prefetched is what the screen reads once for every action of a notice:
// the tenant's connected sources, and the facts about each action's
// subject (FactsAbout of it alone). A nil field is read per action.
type prefetched struct {
	connected []string
	facts     map[commitlayer.Subject][]commitlayer.Fact
	// actions: every action on the subjects requested since the earliest
	// of theirs, in PriorActions' order.
	actions []commitlayer.Action
	// later and prior: the actions that end the action's window and
	// those its contract's limits count (one action's pass: readPass).
	later, prior []commitlayer.Action
}

// laterActions is PriorActions(act's contract, any agent, act's subject,
// [act.RequestedAt, act.WatchUntil], except act) over actions read in its
// order: the filter keeps that order.
func laterActions(actions []commitlayer.Action, act commitlayer.ActionRecord) []commitlayer.Action {
	out := []commitlayer.Action{}
	for _, o := range actions {
		if o.Contract == act.Contract && o.Subject == act.Subject && o.ID != act.ID &&
			!o.RequestedAt.Before(act.RequestedAt) && !o.RequestedAt.After(act.WatchUntil) {
			out = append(out, o)
		}
	}
	return out
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
