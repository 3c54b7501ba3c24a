package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// A verification that watches for 72 hours spends nearly all of them waiting;
// in a worker's sticky cache that costs ~37 KiB of heap and a goroutine
// (docs/benchmarks.md, "Session 6"), and the Go SDK evicts a workflow only when
// it closes or its task fails. So a long wait is slept outside the worker: the
// run continues as new with its first task delayed to the deadline
// (ContinueAsNewErrorOptions.BackoffStartInterval). What wakes it sooner: a
// signal-with-start (verify.Client's notices to verifications old enough to be
// asleep), or an update (a recheck, a wait), delivered in a task of its own.
//
// A plain signal is recorded but wakes nothing until the deadline, and a
// query fails while the run sleeps ("workflow task is not scheduled
// yet"): the store has the verdict (GET /v1/actions/{id}), and the search
// attributes carry it for the Temporal UI. A cancellation request is seen
// at the deadline; termination ends a sleeping verification at once.
//
// Who sleeps is the input's choice (Dormancy): the product's verifications
// (verify.Client) may, a parent's children that it signals plainly (the
// benchmark's scenarios) may not.

// Dormancy lets a verification sleep outside the worker through its long
// waits. The zero value never sleeps.
type Dormancy struct {
	// MinWait: a wait shorter than this is not worth a continue-as-new; the
	// run keeps it on its timer.
	MinWait time.Duration
	// MinAge: a verification sleeps only once its first run started at
	// least this long ago. Notices to a younger one are plain signals
	// (WakeByStart), which must find it awake; see WakeByStart.
	MinAge time.Duration
}

// DefaultDormancy is the product's: waits of ten minutes or more, from 30 s
// after the start. Notices to one younger than 15 s are plain signals: its
// starter starts it well within that.
var DefaultDormancy = Dormancy{MinWait: 10 * time.Minute, MinAge: 30 * time.Second}

// Enabled reports whether verifications with this dormancy ever sleep.
func (d Dormancy) Enabled() bool { return d.MinWait > 0 }

// WakeByStart is the age (from the action's record) from which a notice goes by
// signal-with-start: half of MinAge, leaving the other half as margin for the
// delivery and the hosts' clocks. Younger, a signal-with-start could start a
// verification its starter is about to start itself, with other options.
func (d Dormancy) WakeByStart() time.Duration { return d.MinAge / 2 }

// mayDoze reports whether the verification may sleep outside the worker
// until deadline now: its input allows it, the wait is long enough, it is
// old enough, and nothing is in flight that a sleeping run would drop or
// delay — no signal to handle, no update handler running (a waiter, a
// recheck), no webhook event to deliver, no watch ended.
func (v *verification) mayDoze(ctx workflow.Context, deadline time.Time) bool {
	d := v.in.Dormancy
	if d == nil || !d.Enabled() || v.state.Ended {
		return false
	}
	now := workflow.Now(ctx)
	if deadline.Sub(now) < d.MinWait || now.Before(v.state.Since.Add(d.MinAge)) {
		return false
	}
	if v.signals.Len() > 0 || v.endWatch.Len() > 0 {
		return false
	}
	if v.state.Webhooks != nil && len(v.state.Webhooks.Queue) > 0 {
		return false
	}
	return workflow.AllHandlersFinished(ctx)
}

// dozeTimer returns a timer for when the verification becomes old enough
// to sleep before deadline, or nil when it already is (or never will be
// in this wait).
func (v *verification) dozeTimer(ctx workflow.Context, deadline time.Time) workflow.Future {
	d := v.in.Dormancy
	if d == nil || !d.Enabled() {
		return nil
	}
	at := v.state.Since.Add(d.MinAge)
	now := workflow.Now(ctx)
	if !at.After(now) || deadline.Sub(at) < d.MinWait {
		return nil
	}
	return workflow.NewTimer(ctx, at.Sub(now))
}

// doze ends this run with a continue-as-new whose next run starts at the
// deadline, unless woken sooner (see the top of this file). The state
// travels in the input, as at any continue-as-new.
func (v *verification) doze(ctx workflow.Context, deadline time.Time) error {
	next := v.in
	state := v.state
	state.Naps++
	next.Resume = &state
	return workflow.NewContinueAsNewErrorWithOptions(ctx, workflow.ContinueAsNewErrorOptions{
		BackoffStartInterval: deadline.Sub(workflow.Now(ctx)),
	}, VerifyAction, next)
}

// nudgeIdle tells the waiting main loop that an update handler finished,
// or the last webhook event was delivered: with nothing left in flight,
// the verification may sleep.
func (v *verification) nudgeIdle() {
	if v.idle != nil {
		v.idle.SendAsync(struct{}{})
	}
}
