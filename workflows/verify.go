package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
)

// act is the nil receiver workflows call activities through.
var act *activities.Activities

// Phase is where a verification stands.
type Phase string

const (
	// PhaseSettling: the provisional verdict is out; waiting for the
	// settlement window to close.
	PhaseSettling Phase = "settling"
	// PhaseWatching: the final verdict is out; watching for reversals.
	PhaseWatching Phase = "watching"
)

// VerifyActionInput starts (or continues) the verification of one action.
type VerifyActionInput struct {
	TenantID   string
	ActionID   string
	SettlesAt  time.Time
	WatchUntil time.Time
	// Resume carries the state of a verification across continue-as-new.
	Resume *VerifyState `json:",omitempty"`
	// StoreID names the database the action was recorded in; Evaluate
	// refuses to run on a worker that reads another one.
	StoreID string `json:",omitempty"`
	// Dormancy, when set, lets the verification sleep outside the worker
	// through its long waits (dormant.go). Whoever sends it notices must
	// then wake it by signal-with-start.
	Dormancy *Dormancy `json:",omitempty"`
}

// VerifyState is what a verification remembers between passes.
type VerifyState struct {
	Phase       Phase
	Verdict     commitlayer.Verdict
	Unreachable map[string]string
	Passes      int
	// Ended is set by an end-watch signal: complete once the verdict is
	// final.
	Ended bool `json:",omitempty"`
	// Webhooks holds the verdict events not delivered yet (webhooks.go).
	Webhooks *WebhookState `json:",omitempty"`
	// LastPassAt is when the latest pass started (compact runs).
	LastPassAt time.Time `json:",omitzero"`
	// PulledAt is when the pull the latest pulling pass read started, on
	// the worker's clock (activities.PassResult.PulledAt).
	PulledAt time.Time `json:",omitzero"`
	// Since is when the verification's first run started (set with
	// Dormancy: a verification sleeps only once it is old enough).
	Since time.Time `json:",omitzero"`
	// Naps counts the runs that slept outside the worker (dormant.go).
	Naps int `json:",omitempty"`
	// Compact is set once a run took the compact path (compact.go): the
	// runs after it take it without asking GetVersion again, which would
	// record a marker and a search attribute in each (a woken verification
	// is a new run at every wake).
	Compact bool `json:",omitempty"`
}

// VerifyActionResult is the verdict the verification ended with.
type VerifyActionResult struct {
	Verdict commitlayer.Verdict
	Passes  int
}

// FactsArrived is the payload of SignalFactsArrived. It is empty: a pass
// re-reads everything about the action's subjects, so a list of subjects
// bought nothing (signals sent before carried one; it is still decoded).
type FactsArrived struct {
	Subjects []commitlayer.Subject `json:",omitempty"`
}

// EndWatch is the payload of SignalEndWatch.
type EndWatch struct {
	Reason string
}

// RecheckResult answers UpdateRecheck.
type RecheckResult struct {
	Verdict commitlayer.Verdict
}

// errWatchEnded stops a watch that an end-watch signal ended.
var errWatchEnded = errors.New("watch ended by signal")

// maxPassesPerRun bounds the passes one run makes before it continues as
// new, keeping long watches well inside Temporal's history limits.
const maxPassesPerRun = 200

// VerifyAction verifies one action: pull facts through the tenant's
// connectors → provisional verdict → durable timer until the settlement
// window closes → pull again → final verdict → watch for new facts about the
// subject until the watch ends, re-evaluating on each signal (a reversal
// after settlement turns PASS into FAIL) → complete. A query returns the
// current verdict; an update forces a re-check.
func VerifyAction(ctx workflow.Context, in VerifyActionInput) (VerifyActionResult, error) {
	if in.TenantID == "" || in.ActionID == "" {
		return VerifyActionResult{}, temporal.NewNonRetryableApplicationError("tenant and action ids are required", activities.ErrInvalidInput, nil)
	}
	if in.SettlesAt.IsZero() || in.WatchUntil.Before(in.SettlesAt) {
		return VerifyActionResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("settles_at %s and watch_until %s are not a valid window", in.SettlesAt, in.WatchUntil),
			activities.ErrInvalidInput, nil)
	}
	v := &verification{in: in, signals: workflow.GetSignalChannel(ctx, SignalFactsArrived),
		endWatch: workflow.GetSignalChannel(ctx, SignalEndWatch), mu: workflow.NewMutex(ctx)}
	if in.Resume != nil {
		v.state = *in.Resume
	}
	if in.Dormancy != nil {
		if v.state.Since.IsZero() {
			v.state.Since = workflow.GetInfo(ctx).WorkflowStartTime
		}
		v.idle = workflow.NewBufferedChannel(ctx, 1)
	}
	if err := v.setup(ctx); err != nil {
		return VerifyActionResult{}, err
	}
	res, err := v.run(ctx)
	if err != nil && temporal.IsCanceledError(err) {
		// Cancelled: record that nobody watches this action any more, then
		// end with the verdict reached so far.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		dctx = workflow.WithActivityOptions(dctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
		if eerr := workflow.ExecuteActivity(dctx, act.EndWatch, activities.EndWatchInput{
			TenantID: in.TenantID, ActionID: in.ActionID,
		}).Get(dctx, nil); eerr != nil {
			workflow.GetLogger(ctx).Warn("end watch", "error", eerr)
		}
		return VerifyActionResult{Verdict: v.state.Verdict, Passes: v.state.Passes}, err
	}
	return res, err
}

type verification struct {
	in       VerifyActionInput
	state    VerifyState
	signals  workflow.ReceiveChannel
	endWatch workflow.ReceiveChannel
	mu       workflow.Mutex
	runPass  int // passes in this run (for continue-as-new)
	// closing is set when the run is about to end: waiters (wait.go)
	// answer with what there is.
	closing bool
	hooks   webhooks // verdict events' delivery (webhooks.go)
	// compact: this run takes the compact path (compact.go), once compactKnown.
	compact, compactKnown bool
	// idle receives when an update handler finishes or the webhook queue
	// empties (with Dormancy only):
	// the waiting main loop may then sleep (dormant.go).
	idle workflow.Channel
}

func (v *verification) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryVerdict, func() (commitlayer.Verdict, error) {
		if v.state.Verdict.Version == 0 {
			return commitlayer.Verdict{}, errors.New("no verdict yet")
		}
		return v.state.Verdict, nil
	}); err != nil {
		return fmt.Errorf("set query handler: %w", err)
	}
	if err := v.setupWait(ctx); err != nil {
		return fmt.Errorf("set wait handler: %w", err)
	}
	v.startWebhooks(ctx) // a queue carried over continue-as-new
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRecheck,
		func(ctx workflow.Context) (RecheckResult, error) {
			defer v.nudgeIdle()
			err := v.pass(ctx, true)
			return RecheckResult{Verdict: v.state.Verdict}, err
		},
		workflow.UpdateHandlerOptions{
			// A re-check after the watch ended would re-read nothing new and
			// hold the workflow open: refuse it before it is accepted (a
			// rejected update leaves no trace in the history).
			Validator: func() error {
				if v.state.Ended {
					return errors.New("the verification's watch has ended; its last verdict stands")
				}
				return nil
			},
		})
}

func (v *verification) run(ctx workflow.Context) (VerifyActionResult, error) {
	if v.state.Phase == "" {
		if err := v.pass(ctx, true); err != nil {
			return VerifyActionResult{}, err
		}
		v.state.Phase = PhaseSettling
	}
	if v.state.Phase == PhaseSettling {
		if err := v.waitUntil(ctx, v.in.SettlesAt); err != nil {
			return VerifyActionResult{}, err
		}
		v.state.Phase = PhaseWatching // the settlement re-read makes the verdict final
		if err := v.pass(ctx, true); err != nil {
			return VerifyActionResult{}, err
		}
	}
	if !v.state.Ended {
		if err := v.waitUntil(ctx, v.in.WatchUntil); err != nil && !errors.Is(err, errWatchEnded) {
			return VerifyActionResult{}, err
		}
	}
	// Version 1 ends with a pass over everything stored: facts whose notice
	// was lost (Temporal away when they were ingested, a signal dropped)
	// still count before the verification completes.
	if v.finalPassNeeded(ctx) {
		if err := v.pass(ctx, false); err != nil {
			return VerifyActionResult{}, err
		}
	}
	if v.state.Ended {
		// Ended early: record it so pollers and ingestion stop nudging.
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
		if err := workflow.ExecuteActivity(actx, act.EndWatch, activities.EndWatchInput{
			TenantID: v.in.TenantID, ActionID: v.in.ActionID,
		}).Get(ctx, nil); err != nil {
			return VerifyActionResult{}, fmt.Errorf("end watch: %w", err)
		}
	}
	// Deliver the verdict events still queued, then let a recheck that is
	// in flight finish before completing.
	if err := v.awaitWebhooks(ctx); err != nil {
		return VerifyActionResult{}, err
	}
	v.closing = true
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return VerifyActionResult{}, err
	}
	return VerifyActionResult{Verdict: v.state.Verdict, Passes: v.state.Passes}, nil
}

// waitUntil waits for the deadline, re-evaluating whenever facts arrive. It
// continues as new when this run's history has grown long, and sleeps
// outside the worker when its input allows (dormant.go).
func (v *verification) waitUntil(ctx workflow.Context, deadline time.Time) error {
	d := deadline.Sub(workflow.Now(ctx))
	if d <= 0 {
		return v.drain(ctx)
	}
	if v.in.Dormancy != nil && v.receivePending(ctx) {
		// Woken by a notice (or it came while this run was starting): its
		// pass first, then perhaps back to sleep, with no timer started and
		// cancelled for nothing.
		if err := v.pass(ctx, false); err != nil {
			return err
		}
	}
	if v.mayDoze(ctx, deadline) {
		return v.doze(ctx, deadline)
	}
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(timerCtx, d)
	// With Dormancy: the moment the verification is old enough to sleep,
	// and the end of an update handler, are worth a look too. Without it
	// neither is added, and histories replay as they were recorded.
	oldEnough := v.dozeTimer(timerCtx, deadline)
	for {
		fired := false
		nudged := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.AddReceive(v.signals, func(c workflow.ReceiveChannel, more bool) {
			var fa FactsArrived
			c.Receive(ctx, &fa)
			nudged = true
		})
		sel.AddReceive(v.endWatch, func(c workflow.ReceiveChannel, more bool) {
			var ew EndWatch
			c.Receive(ctx, &ew)
			v.state.Ended = true
		})
		if v.idle != nil {
			sel.AddReceive(v.idle, func(c workflow.ReceiveChannel, more bool) { c.Receive(ctx, nil) })
		}
		if oldEnough != nil {
			sel.AddFuture(oldEnough, func(workflow.Future) { oldEnough = nil })
		}
		sel.Select(ctx)
		if v.state.Ended && v.state.Phase == PhaseWatching {
			return errWatchEnded
		}
		if nudged {
			v.receivePending(ctx)
			if err := v.pass(ctx, false); err != nil {
				return err
			}
			if v.shouldContinueAsNew(ctx) {
				return v.continueAsNew(ctx)
			}
		}
		if fired {
			if err := timer.Get(ctx, nil); err != nil {
				return err // cancelled
			}
			return v.drain(ctx)
		}
		if v.mayDoze(ctx, deadline) {
			return v.doze(ctx, deadline)
		}
	}
}

// drain handles signals that arrived together with a deadline.
func (v *verification) drain(ctx workflow.Context) error {
	if v.receivePending(ctx) {
		return v.pass(ctx, false)
	}
	return nil
}

// receivePending consumes every buffered signal, reporting whether there
// was one: a burst of facts costs one pass.
func (v *verification) receivePending(ctx workflow.Context) bool {
	got := false
	for {
		var fa FactsArrived
		if !v.signals.ReceiveAsync(&fa) {
			return got
		}
		got = true
	}
}

func (v *verification) shouldContinueAsNew(ctx workflow.Context) bool {
	return v.runPass >= maxPassesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

func (v *verification) continueAsNew(ctx workflow.Context) error {
	v.closing = true
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	// Signals that arrived meanwhile are handled before the run ends; none
	// is lost across the boundary.
	if err := v.drain(ctx); err != nil {
		return err
	}
	next := v.in
	state := v.state
	next.Resume = &state
	return workflow.NewContinueAsNewError(ctx, VerifyAction, next)
}

// pass runs one verification pass: optionally pull the connectors, then
// evaluate and store. Passes never overlap (an update may arrive while the
// main loop is in one).
func (v *verification) pass(ctx workflow.Context, pull bool) error {
	if err := v.mu.Lock(ctx); err != nil {
		return err
	}
	defer v.mu.Unlock()
	if v.isCompact(ctx) {
		return v.compactPass(ctx, pull)
	}

	// Version 1 runs a pass's steps as local activities on the workflow's
	// worker: no task-queue round trips, a pass in one workflow task.
	local := workflow.GetVersion(ctx, "pass-local-activities", workflow.DefaultVersion, 1) >= 1
	run := func(opts workflow.ActivityOptions, fn, arg, out any) error {
		if local {
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: opts.StartToCloseTimeout,
				RetryPolicy:         opts.RetryPolicy,
			})
			return workflow.ExecuteLocalActivity(lctx, fn, arg).Get(ctx, out)
		}
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), fn, arg).Get(ctx, out)
	}
	var pullTook time.Duration
	if pull {
		var res activities.ExtractResult
		if err := run(workflow.ActivityOptions{
			StartToCloseTimeout: 2 * time.Minute,
			HeartbeatTimeout:    30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval:        time.Second,
				MaximumInterval:        time.Minute,
				NonRetryableErrorTypes: []string{activities.ErrInvalidInput},
			},
		}, act.Extract, activities.ExtractInput{TenantID: v.in.TenantID, ActionID: v.in.ActionID}, &res); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		v.state.Unreachable = res.Unreachable
		pullTook = res.Took
	}
	var res activities.EvaluateResult
	if err := run(workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrInvalidInput},
		},
	}, act.Evaluate, activities.EvaluateInput{
		TenantID:    v.in.TenantID,
		ActionID:    v.in.ActionID,
		StoreID:     v.in.StoreID,
		Unreachable: v.state.Unreachable,
		Provisional: v.state.Phase != PhaseWatching,
		PullTook:    pullTook,
		Known:       v.state.Verdict.Version,
	}, &res); err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	v.state.Passes++
	v.runPass++
	changed := res.Verdict.Version != v.state.Verdict.Version
	v.state.Verdict = res.Verdict
	v.hooks.wanted = res.Webhooks
	if changed {
		return v.publish(ctx)
	}
	return nil
}

// publish makes the current verdict visible in the Temporal UI: search
// attributes, memo and current details.
func (v *verification) publish(ctx workflow.Context) error {
	verdict := v.state.Verdict
	sas := []temporal.SearchAttributeUpdate{
		SAVerdict.ValueSet(string(verdict.Status)),
		SAProvisional.ValueSet(verdict.Provisional),
	}
	// A run started without its contract (VerifySearchAttributes) gets it
	// in its first verdict's upsert. The same command as before, so no
	// GetVersion (replay matches an upsert by its type, not its fields);
	// runs started with it, and those continued as new, are upserted as
	// they were.
	if _, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(SAContract); !ok && verdict.Contract != "" {
		sas = append(sas, SAContract.ValueSet(verdict.Contract))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, sas...); err != nil {
		return fmt.Errorf("upsert search attributes: %w", err)
	}
	if !v.isCompact(ctx) {
		if err := workflow.UpsertMemo(ctx, map[string]any{"verdict": verdict.Summary()}); err != nil {
			return fmt.Errorf("upsert memo: %w", err)
		}
	}
	workflow.SetCurrentDetails(ctx, details(verdict))
	v.queueWebhooks(ctx)
	return nil
}

// details renders a verdict in Temporal markdown for the UI.
func details(v commitlayer.Verdict) string {
	s := fmt.Sprintf("**%s**", v.Status)
	if v.Provisional {
		s += " (provisional)"
	}
	s += fmt.Sprintf(" · outcome %s · policy %s · version %d · settles %s\n",
		v.Lenses.Outcome, v.Lenses.Policy, v.Version, v.SettlesAt.UTC().Format(time.RFC3339))
	for _, f := range v.Findings {
		s += fmt.Sprintf("\n- `%s` %s (%s): %s", f.Code, f.Check, f.Lens, f.Message)
	}
	if len(v.UnavailableSources) > 0 {
		s += fmt.Sprintf("\n\nunavailable sources: %v", v.UnavailableSources)
	}
	return s
}
