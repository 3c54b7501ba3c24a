// Package verify is the client side of CommitLayer's verifications: it
// starts VerifyAction workflows, nudges them when facts arrive, and asks
// them for re-checks. The API and the activities use it; it holds the one
// Temporal client of the process.
package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// ErrNotRunning means the verification has ended (its watch is over) or
// never started, so it cannot be re-checked.
var ErrNotRunning = errors.New("verification is not running")

// Store is what the client needs from the database.
type Store interface {
	WatchedActions(ctx context.Context, tenantID string, subjects []commitlayer.Subject, now time.Time) ([]commitlayer.ActionRecord, error)
	ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error)
	LinkedSubjects(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Subject, error)
	VerificationStarted(ctx context.Context, tenantID, actionID string) error
	// StartFailed marks a verification whose start Temporal refused for
	// good; it reports whether this call marked it.
	StartFailed(ctx context.Context, tenantID, actionID, reason string) (bool, error)
}

// Screener picks, among the watching verifications new facts reach, those
// to wake (true) — activities.Screen. It never fails: what it cannot
// decide it wakes. digest digests the new facts (nil: not said).
type Screener interface {
	Wakes(ctx context.Context, tenantID string, acts []commitlayer.ActionRecord, digest *commitlayer.FactsDigest) []bool
}

// maxNudgeSubjects bounds how far NotifyFacts widens a batch's subjects
// through links (a customer linked to every one of its orders).
const maxNudgeSubjects = 2000

// Client starts, signals and updates verifications.
type Client struct {
	Temporal  client.Client
	Store     Store
	TaskQueue string // defaults to workflows.TaskQueue
	// PollInterval is how often a tenant's connectors are pulled while it
	// has open verifications; zero means workflows.DefaultPollInterval.
	PollInterval time.Duration
	Logger       *slog.Logger
	// SignalConcurrency bounds the facts-arrived signals this client has
	// in flight at once (zero: 32). Signals are coalesced per
	// verification (notify.go).
	SignalConcurrency int
	// SignalWindow, when positive, is the least time between two
	// facts-arrived signals to one verification: facts that arrive within
	// it after a signal wake it once, when it ends. Zero: no window (a
	// notice that came while a signal flew goes right after it). Callers
	// wait for their signal, so a window also delays them: a pull inside a
	// pass (activities.Extract) that names a verification signalled less
	// than a window ago waits for it.
	SignalWindow time.Duration
	// SignalRate bounds the facts-arrived signals this client sends a
	// second (zero: no bound). Past it signals wait their turn in the
	// queue, and ingest does not share the machine with a storm of wakes.
	SignalRate float64
	// StoreID is the identity of the database actions are recorded in
	// (postgres.DB.Identity), carried to the workers so one on another
	// database refuses to verify instead of failing on "not found".
	StoreID string
	// BackgroundStarts, when positive, lets Start return as soon as the
	// workflow is started and finish the start's bookkeeping (nudge the
	// earlier verifications on the subject, start the tenant's poller,
	// then mark the action started) in the background, this many at
	// once; past that Start does it before returning. Marking comes last,
	// so after a crash in between the reconciler (which starts the actions
	// never marked) does it all again. Only with a reconciler running.
	BackgroundStarts int

	// Dormancy is what the verifications this client starts may sleep
	// through outside the worker (workflows/dormant.go); notices to those
	// old enough to be asleep go by signal-with-start. The zero value: none
	// sleep, and notices are plain signals. Every process that starts
	// verifications or sends their notices should hold the same.
	Dormancy workflows.Dormancy

	// EarlyPass, when set, is run by Start while Temporal persists the
	// start: a new action's first pass ahead of its verification
	// (activities.EarlyPass, which stores a provisional verdict for a
	// tenant without connectors). Start returns once both are done, so the
	// caller's answer finds the first verdict stored, but waits for the
	// early pass at most EarlyPassGrace past an accepted start: a slow one
	// finishes in the background, and the verification answers first if it
	// gets there first. A start Temporal refuses is marked failed only once
	// the early pass is over, which deletes its verdict
	// (Store.StartFailed). A failed early pass is logged and leaves the
	// first verdict to the verification.
	EarlyPass func(ctx context.Context, tenantID, actionID string) error
	// EarlyPassGrace is how long Start waits for the early pass after
	// Temporal accepted the start; zero means DefaultEarlyPassGrace.
	EarlyPassGrace time.Duration

	// Screen, when set, decides which watching verifications new facts
	// need to wake (activities.Screen: those whose verdict the facts
	// change); nil wakes every one.
	Screen Screener

	bgOnce sync.Once
	bg     chan struct{}

	notifyOnce sync.Once
	notifier   *notifier
}

func (c *Client) taskQueue() string {
	if c.TaskQueue != "" {
		return c.TaskQueue
	}
	return workflows.TaskQueue
}

func (c *Client) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// StartOptions are the workflow options of an action's verification:
// a deterministic ID, reject-duplicate reuse, and the search attributes that
// make it findable.
func StartOptions(taskQueue, tenantID string, a commitlayer.ActionRecord) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       workflows.VerifyWorkflowID(tenantID, a.ID),
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		TypedSearchAttributes:    workflows.VerifySearchAttributes(tenantID, a.Action),
		StaticSummary:            workflows.VerifySummary(a.Action),
		// A worker in this process (dev, bench) gets the first workflow
		// task in the start's answer: no trip through the task queue.
		// Elsewhere the server dispatches it as usual.
		EnableEagerStart: true,
		StaticDetails: fmt.Sprintf("action `%s` requested %s; settles %s; watched until %s",
			a.ID, a.RequestedAt.UTC().Format(time.RFC3339), a.SettlesAt.UTC().Format(time.RFC3339),
			a.WatchUntil.UTC().Format(time.RFC3339)),
	}
}

// input is the VerifyAction input for a stored action: recorded in the
// database c.StoreID names (empty skips the worker's check), and allowed
// c.Dormancy.
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

// Start begins the verification of a stored action and marks it started
// in the store (the reconciler starts the actions never marked). Starting
// one that already exists (running or finished) is not an error: the
// action's verification is unique.
//
// A start Temporal refuses for its content (InvalidArgument) is marked
// failed in the store and returned as a *StartRefusedError: it leaves the
// pending starts. A Temporal that does not answer gives an *AwayError.
func (c *Client) Start(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	early := c.earlyPass(ctx, tenantID, a)
	_, err := c.Temporal.ExecuteWorkflow(ctx, StartOptions(c.taskQueue(), tenantID, a), workflows.VerifyAction, c.input(tenantID, a))
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err == nil || errors.As(err, &started) {
		c.awaitEarly(early)
	} else {
		<-early // before a refused start is marked failed, which deletes its verdict
	}
	if err != nil && !errors.As(err, &started) {
		switch classify(err) {
		case faultBad:
			refused := &StartRefusedError{ActionID: a.ID, Reason: refusedReason(err), Err: err}
			if _, merr := c.Store.StartFailed(ctx, tenantID, a.ID, refused.Reason); merr != nil {
				return fmt.Errorf("start verification of %s: %w (and marking it failed: %w)", a.ID, err, merr)
			}
			return refused
		case faultAway:
			return fmt.Errorf("start verification of %s: %w", a.ID, &AwayError{Err: err})
		}
		return fmt.Errorf("start verification of %s: %w", a.ID, err)
	}
	if c.BackgroundStarts > 0 {
		c.bgOnce.Do(func() { c.bg = make(chan struct{}, c.BackgroundStarts) })
		select {
		case c.bg <- struct{}{}:
			go func() {
				defer func() { <-c.bg }()
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backgroundStartTimeout)
				defer cancel()
				if err := c.finishStart(bctx, tenantID, a); err != nil {
					c.logger().Warn("verification start's bookkeeping left to the reconciler", "action", a.ID, "error", err)
				}
			}()
			return nil
		default:
		}
	}
	return c.started(ctx, tenantID, a)
}

// earlyPassTimeout bounds an early pass (Client.EarlyPass): past it the
// verification's own first pass answers.
const earlyPassTimeout = 5 * time.Second

// DefaultEarlyPassGrace is how long Start waits, past an accepted start,
// for an early pass still running (Client.EarlyPassGrace). An early pass
// takes a few milliseconds, usually less than the start RPC beside it.
const DefaultEarlyPassGrace = 250 * time.Millisecond

// awaitEarly waits for the early pass at most the client's grace.
func (c *Client) awaitEarly(early <-chan struct{}) {
	grace := c.EarlyPassGrace
	if grace <= 0 {
		grace = DefaultEarlyPassGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-early:
	case <-t.C:
	}
}

// earlyPass starts the early pass of a new action, when the client has
// one, and returns what is closed when it is over.
func (c *Client) earlyPass(ctx context.Context, tenantID string, a commitlayer.ActionRecord) <-chan struct{} {
	done := make(chan struct{})
	if c.EarlyPass == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), earlyPassTimeout)
		defer cancel()
		if err := c.EarlyPass(ectx, tenantID, a.ID); err != nil {
			c.logger().Warn("early pass left to the verification", "tenant", tenantID, "action", a.ID, "error", err)
		}
	}()
	return done
}

// backgroundStartTimeout bounds the bookkeeping Start leaves to the
// background.
const backgroundStartTimeout = 30 * time.Second

// finishStart is started's work with the mark last: nudge the earlier
// actions on the subject, run the tenant's poller, then mark the action
// started. A failure leaves it unmarked for the reconciler.
func (c *Client) finishStart(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	if err := c.NotifyFacts(ctx, tenantID, []commitlayer.Subject{a.Subject}, nil, a.ID); err != nil {
		c.logger().Warn("notify earlier verifications", "action", a.ID, "error", err)
	}
	if err := c.ensurePoller(ctx, tenantID); err != nil {
		return err
	}
	return c.Store.VerificationStarted(ctx, tenantID, a.ID)
}

// started is what follows a verification's start: mark it in the store,
// nudge the earlier actions on the subject, run the tenant's poller.
func (c *Client) started(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	if err := c.Store.VerificationStarted(ctx, tenantID, a.ID); err != nil {
		return err
	}
	// A new action on a subject ends the effect window of earlier ones on
	// it: let their verifications look again.
	if err := c.NotifyFacts(ctx, tenantID, []commitlayer.Subject{a.Subject}, nil, a.ID); err != nil {
		c.logger().Warn("notify earlier verifications", "action", a.ID, "error", err)
	}
	return c.ensurePoller(ctx, tenantID)
}

// ensurePoller starts the tenant's connector poller unless it runs, when
// the tenant has connectors to poll.
func (c *Client) ensurePoller(ctx context.Context, tenantID string) error {
	conns, err := c.Store.ListConnectors(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("list connectors of %s: %w", tenantID, err)
	}
	if len(conns) == 0 {
		return nil
	}
	_, err = c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
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

// probeTimeout bounds the look at a verification before a call that may
// wait long (a recheck, a wait for a verdict): a Temporal that is away
// answers the caller in this time, not in the call's own timeout.
const probeTimeout = 2 * time.Second

// probe asks Temporal about the verification's workflow within
// probeTimeout: ErrNotRunning when it does not exist or has closed, an
// *AwayError when Temporal does not answer.
func (c *Client) probe(ctx context.Context, workflowID string) error {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	d, err := c.Temporal.DescribeWorkflow(pctx, workflowID, "")
	switch {
	case err == nil:
		if d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return ErrNotRunning
		}
		return nil
	case isNotRunning(err):
		return ErrNotRunning
	case classify(err) == faultAway:
		return &AwayError{Err: err}
	}
	return err
}

// Recheck forces a re-verification now and returns the new current
// verdict. A Temporal that is away fails it within about 2 s (an
// *AwayError: commitlayer.ErrUnavailable), not after ctx's deadline.
func (c *Client) Recheck(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	if err := c.probe(ctx, workflows.VerifyWorkflowID(tenantID, actionID)); err != nil {
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, err)
	}
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.VerifyWorkflowID(tenantID, actionID),
		UpdateName:   workflows.UpdateRecheck,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		if isNotRunning(err) {
			return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, ErrNotRunning)
		}
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, err)
	}
	var res workflows.RecheckResult
	if err := h.Get(ctx, &res); err != nil {
		return commitlayer.Verdict{}, fmt.Errorf("recheck %s: %w", actionID, err)
	}
	return res.Verdict, nil
}

// Current asks a running verification for its current verdict.
func (c *Client) Current(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	val, err := c.Temporal.QueryWorkflow(ctx, workflows.VerifyWorkflowID(tenantID, actionID), "", workflows.QueryVerdict)
	if err != nil {
		if isNotRunning(err) {
			return commitlayer.Verdict{}, fmt.Errorf("query %s: %w", actionID, ErrNotRunning)
		}
		return commitlayer.Verdict{}, fmt.Errorf("query %s: %w", actionID, err)
	}
	var v commitlayer.Verdict
	if err := val.Get(&v); err != nil {
		return commitlayer.Verdict{}, fmt.Errorf("query %s: decode: %w", actionID, err)
	}
	return v, nil
}

func isNotRunning(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// FactsArrived tells open verifications that these subjects got new facts,
// which digest digests when not nil (the screen then spares the
// verifications facts like those cannot change, reading only their latest
// verdict's head).
func (c *Client) FactsArrived(ctx context.Context, tenantID string, subjects []commitlayer.Subject, digest *commitlayer.FactsDigest) error {
	return c.NotifyFacts(ctx, tenantID, subjects, digest, "")
}

// NotifyFacts signals the verifications still watching any of the
// subjects, or a subject up to two links away from one (a refund on an
// order reaches the cancellation of its customer's subscription, which
// forbids refunds through the customer), except exceptActionID, and
// returns once each has been delivered a signal sent after the call
// began. Signals are coalesced across calls (notify.go): a verification
// waiting for its signal gets one, however many batches named it. The
// store is asked once per call (the links' two hops, then the watched
// actions), never per fact. With a Screen, only the verifications whose
// verdict the stored facts change are signalled (the others are counted
// in NoticeStats.Screened); digest, when not nil, digests the new facts
// for the screen (Screener). A verification that has just ended is not an
// error.
func (c *Client) NotifyFacts(ctx context.Context, tenantID string, subjects []commitlayer.Subject, digest *commitlayer.FactsDigest, exceptActionID string) error {
	if len(subjects) == 0 {
		return nil
	}
	subjects, err := c.reach(ctx, tenantID, subjects)
	if err != nil {
		return err
	}
	watched, err := c.Store.WatchedActions(ctx, tenantID, subjects, time.Now())
	if err != nil {
		return fmt.Errorf("watched actions of %s: %w", tenantID, err)
	}
	others := make([]commitlayer.ActionRecord, 0, len(watched))
	for _, a := range watched {
		// One whose start Temporal refused has nothing to wake.
		if a.ID != exceptActionID && a.VerificationFailedAt.IsZero() {
			others = append(others, a)
		}
	}
	var wakes []bool
	if c.Screen != nil && len(others) > 0 {
		wakes = c.Screen.Wakes(ctx, tenantID, others, digest)
	}
	targets := make([]target, 0, len(others))
	for i, a := range others {
		if wakes != nil && i < len(wakes) && !wakes[i] {
			c.notices().screened.Add(1)
			continue
		}
		targets = append(targets, target{workflowID: workflows.VerifyWorkflowID(tenantID, a.ID), tenantID: tenantID, action: a})
	}
	if len(targets) == 0 {
		return nil
	}
	return c.notices().notify(ctx, targets)
}

// reach widens subjects by two hops of links, as far as maxNudgeSubjects.
func (c *Client) reach(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Subject, error) {
	all := append([]commitlayer.Subject(nil), subjects...)
	frontier := subjects
	for range 2 {
		if len(all) >= maxNudgeSubjects || len(frontier) == 0 {
			break
		}
		next, err := c.Store.LinkedSubjects(ctx, tenantID, frontier)
		if err != nil {
			return nil, fmt.Errorf("subjects linked to the new facts: %w", err)
		}
		frontier = nil
		seen := make(map[commitlayer.Subject]bool, len(all))
		for _, s := range all {
			seen[s] = true
		}
		for _, s := range next {
			if !seen[s] && len(all) < maxNudgeSubjects {
				all = append(all, s)
				frontier = append(frontier, s)
			}
		}
	}
	return all, nil
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
