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
	Evaluate    EvaluateResult
	Pulled      bool              // then Unreachable is that pull's
	Unreachable map[string]string `json:",omitempty"`
	PulledAt    time.Time         `json:",omitzero"` // when the pull started
}

// EvaluateInput asks for one verification pass over stored facts.
type EvaluateInput struct {
	TenantID string
	ActionID string
	// StoreID is the database the action was recorded in (empty in older
	// histories): a worker on another database refuses the pass, loudly.
	StoreID string
	// Unreachable sources from the latest pull: not connected for this pass.
	Unreachable map[string]string
	// Provisional forces a provisional verdict (no settlement re-read yet).
	Provisional bool
	PullTook    time.Duration `json:",omitempty"` // in older histories; not read
	// Known is the verdict version the verification holds (0: none): a newer
	// stored one is news even when this pass appended nothing.
	Known int `json:",omitempty"`
}

// EvaluateResult is the verdict stored for the pass.
type EvaluateResult struct {
	Verdict commitlayer.Verdict
	Changed bool // false: nothing new, no version added
	// Webhooks: the verdict is news (changed or newer than Known) and the
	// tenant has webhooks, so the verification queues its events.
	Webhooks bool `json:",omitempty"`
}

// MetricPassLatency is the histogram of passes from start (pull included) to
// verdict stored: commitlayer_verify_pass_latency_seconds{pulled} on /metrics.
const MetricPassLatency = "commitlayer_verify_pass_latency"

// Pass is one verification pass: pull the tenant's connectors (extract.go,
// shared between concurrent passes by coalesce.go) while loading the action and
// contract; read in one round trip what the contract reads; evaluate; append
// the verdict when its answer changed. It runs as a local activity; a retry is
// safe because the pull and the append are idempotent.
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

// verdict evaluates act's contract over what the pass read; provisional when asked.
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

// FirstVerdict runs a connector-less tenant's first pass beside the start of
// the verification, in the recording process (service.Actions), stored only as
// the first verdict (AppendFirstVerdict: the verification's own answer stands).
// The verification still evaluates; this verdict is news to it (Known), so it
// publishes it. StartFailed deletes it. See docs/benchmarks.md ("Speed-ups kept
// and removed"). A function: every exported method of Activities is an activity.
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

// Evaluate is a pass without a pull, for older histories (workflows/verify.go).
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

// action loads the action and its compiled contract from database storeID (empty: unchecked).
func (a *Activities) action(ctx context.Context, storeID, tenantID, actionID string) (commitlayer.ActionRecord, *contracts.Contract, error) {
	if err := a.checkStore(ctx, storeID); err != nil {
		return commitlayer.ActionRecord{}, nil, err
	}
	act, err := a.Store.GetAction(ctx, tenantID, actionID)
	if errors.Is(err, commitlayer.ErrNotFound) {
		// Recorded before its verification started, so a lagging replica or a
		// worker on another database: retried, and loud.
		a.logger(ctx).Error("pass: action not found in this worker's database; retrying", "tenant", tenantID, "action", actionID)
		return act, nil, fmt.Errorf("pass: action %s not found (a lagging replica, or a worker on another database than the API's?)", actionID)
	} else if err != nil {
		return act, nil, fmt.Errorf("pass: load action %s: %w", actionID, err)
	}
	c, err := a.contract(ctx, tenantID, act.Contract, act.ContractVersion)
	return act, c, err
}

// read reads what the evaluation of act reads in one round trip (ReadPass),
// then the facts of the subjects a `through` forbid or prior actions reach.
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
	// `through` forbids read one hop further, and limits read the prior
	// actions' subjects' facts.
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

// orEmpty is s, or an empty slice for nil (the engine's "read, and none").
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// checkStore fails, retryably and loudly, when want is not this worker's database.
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

// contract returns the compiled contract version through the process's loader.
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
