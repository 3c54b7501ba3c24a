// Package verify is the Temporal side of CommitLayer's verifications: it
// starts, waits for, re-checks and signals VerifyAction workflows (and starts
// connector pollers). It holds no store: the service package decides.
package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// ErrNotRunning means the verification has ended (its watch is over) or
// never started, so it cannot be re-checked.
var ErrNotRunning = errors.New("verification is not running")

// Client starts, waits for, updates and signals verifications.
type Client struct {
	Temporal  client.Client
	TaskQueue string // defaults to workflows.TaskQueue
	// PollInterval is how often open verifications' connectors are pulled;
	// zero means workflows.DefaultPollInterval.
	PollInterval time.Duration
	// StoreID is the actions' database (postgres.DB.Identity), so a worker on
	// another database refuses to verify instead of failing on "not found".
	StoreID string
	// Dormancy is what verifications may sleep through outside the worker
	// (workflows/dormant.go; zero: none); signals to those old enough to be
	// asleep go by signal-with-start. Every process should hold the same.
	Dormancy workflows.Dormancy
	// SignalConcurrency bounds Signal's signals in flight (zero: 32).
	SignalConcurrency int
}

func (c *Client) taskQueue() string {
	if c.TaskQueue != "" {
		return c.TaskQueue
	}
	return workflows.TaskQueue
}

// StartOptions are an action's verification's workflow options: deterministic
// ID, reject-duplicate reuse, search attributes.
func StartOptions(taskQueue, tenantID string, a commitlayer.ActionRecord) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       workflows.VerifyWorkflowID(tenantID, a.ID),
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		TypedSearchAttributes:    workflows.VerifySearchAttributes(tenantID, a.Action),
		StaticSummary:            workflows.VerifySummary(a.Action),
		// A worker in this process gets the first workflow task in the start's
		// answer: no trip through the task queue.
		EnableEagerStart: true,
		StaticDetails: fmt.Sprintf("action `%s` requested %s; settles %s; watched until %s",
			a.ID, a.RequestedAt.UTC().Format(time.RFC3339), a.SettlesAt.UTC().Format(time.RFC3339),
			a.WatchUntil.UTC().Format(time.RFC3339)),
	}
}

// input is the VerifyAction input for a stored action.
func (c *Client) input(tenantID string, a commitlayer.ActionRecord) workflows.VerifyActionInput {
	in := workflows.VerifyActionInput{
		TenantID: tenantID, ActionID: a.ID, SettlesAt: a.SettlesAt, WatchUntil: a.WatchUntil, StoreID: c.StoreID,
	}
	if c.Dormancy.Enabled() {
		d := c.Dormancy
		in.Dormancy = &d
	}
	return in
}

// Start begins the verification of a stored action; one that exists already is
// not an error. A start refused for its content gives a *StartRefusedError; a
// Temporal that does not answer an *AwayError.
func (c *Client) Start(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, StartOptions(c.taskQueue(), tenantID, a), workflows.VerifyAction, c.input(tenantID, a))
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err == nil || errors.As(err, &started) {
		return nil
	}
	return startError(a.ID, err)
}

func startError(actionID string, err error) error {
	switch classify(err) {
	case faultBad:
		return &StartRefusedError{ActionID: actionID, Reason: refusedReason(err), Err: err}
	case faultAway:
		return fmt.Errorf("start verification of %s: %w", actionID, &AwayError{Err: err})
	}
	return fmt.Errorf("start verification of %s: %w", actionID, err)
}

// Wait starts the verification unless it runs, and waits in the same call
// (update-with-start, no polling) for a verdict at the stage asked: the first,
// or with final a non-provisional one. It returns the verdict and whether it is
// at the stage (false: the run continued as new first); ctx's error when ctx
// ended first (Start again, it is idempotent); ErrNotRunning when it ended.
func (c *Client) Wait(ctx context.Context, tenantID string, a commitlayer.ActionRecord, final bool) (commitlayer.Verdict, bool, error) {
	// A Temporal that is away fails the wait within about 2 s, not after
	// ctx's deadline (the update-with-start retries until then).
	if err := c.CheckHealth(ctx); err != nil {
		return commitlayer.Verdict{}, false, fmt.Errorf("wait for verdict of %s: %w", a.ID, &AwayError{Err: err})
	}
	opts := StartOptions(c.taskQueue(), tenantID, a)
	// Attach to the running verification instead of failing; a closed one
	// is still refused by the reject-duplicate reuse policy.
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	op := c.Temporal.NewWithStartWorkflowOperation(opts, workflows.VerifyAction, c.input(tenantID, a))
	h, err := c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   opts.ID,
			UpdateName:   workflows.UpdateWaitVerdict,
			Args:         []any{workflows.WaitVerdictInput{Final: final}},
			WaitForStage: client.WorkflowUpdateStageAccepted,
		},
	})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) || isNotRunning(err) {
			return commitlayer.Verdict{}, false, fmt.Errorf("wait for verdict of %s: %w", a.ID, ErrNotRunning)
		}
		if classify(err) == faultBad {
			return commitlayer.Verdict{}, false, startError(a.ID, err)
		}
		return commitlayer.Verdict{}, false, fmt.Errorf("wait for verdict of %s: start: %w", a.ID, err)
	}
	var res workflows.WaitVerdictResult
	if err := h.Get(ctx, &res); err != nil {
		return commitlayer.Verdict{}, false, fmt.Errorf("wait for verdict of %s: %w", a.ID, err)
	}
	return res.Verdict, res.Reached, nil
}

// EnsurePoller starts the tenant's connector poller unless it runs.
func (c *Client) EnsurePoller(ctx context.Context, tenantID string) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.PollWorkflowID(tenantID),
		TaskQueue:                c.taskQueue(),
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.SATenant.ValueSet(tenantID)),
		StaticSummary:            "pull connectors of " + tenantID,
	}, workflows.PollConnectors, workflows.PollConnectorsInput{TenantID: tenantID, Interval: c.PollInterval})
	if err != nil {
		return fmt.Errorf("start connector poller of %s: %w", tenantID, err)
	}
	return nil
}

// probeTimeout bounds the look at a verification before a long call, so an
// away Temporal answers in this time, not the call's own timeout.
const probeTimeout = 2 * time.Second

// Recheck forces a pass with a fresh pull now and returns the new current
// verdict; an away Temporal fails it within about 2 s (*AwayError).
func (c *Client) Recheck(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	id := workflows.VerifyWorkflowID(tenantID, actionID)
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	d, err := c.Temporal.DescribeWorkflow(pctx, id, "")
	cancel()
	switch {
	case isNotRunning(err) || (err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING):
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, ErrNotRunning)
	case err != nil && classify(err) == faultAway:
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, &AwayError{Err: err})
	case err != nil:
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, err)
	}
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdateRecheck, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		if isNotRunning(err) {
			err = ErrNotRunning
		}
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, err)
	}
	var res workflows.RecheckResult
	if err := h.Get(ctx, &res); err != nil {
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, err)
	}
	return res.Verdict, nil
}

func isNotRunning(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// Signal tells each verification of acts that facts on its subjects arrived,
// SignalConcurrency at once (an ended one is not an error). One that may be
// asleep (workflows/dormant.go) gets signal-with-start, which wakes it (a
// closed one is refused by reject-duplicate, one never started is started with
// the reconciler's options); a younger one gets a plain signal, since a
// signal-with-start could start it before its starter does.
func (c *Client) Signal(ctx context.Context, tenantID string, acts []commitlayer.ActionRecord) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(c.SignalConcurrency, 32))
	now := time.Now()
	for _, a := range acts {
		g.Go(func() error {
			id := workflows.VerifyWorkflowID(tenantID, a.ID)
			var err error
			if c.Dormancy.Enabled() && now.Sub(a.CreatedAt) >= c.Dormancy.WakeByStart() {
				opts := StartOptions(c.taskQueue(), tenantID, a)
				opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
				opts.EnableEagerStart = false
				_, err = c.Temporal.SignalWithStartWorkflow(ctx, id, workflows.SignalFactsArrived,
					workflows.FactsArrived{}, opts, workflows.VerifyAction, c.input(tenantID, a))
				var started *serviceerror.WorkflowExecutionAlreadyStarted
				if errors.As(err, &started) {
					return nil // closed: its watch is over
				}
			} else {
				err = c.Temporal.SignalWorkflow(ctx, id, "", workflows.SignalFactsArrived, workflows.FactsArrived{})
			}
			if err != nil && !isNotRunning(err) {
				return fmt.Errorf("signal %s: %w", id, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// CheckHealth reports whether the Temporal frontend answers (for /readyz),
// within probeTimeout at most.
func (c *Client) CheckHealth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := c.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal health: %w", err)
	}
	return nil
}
