package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/activities"
)

// changeCompactHistory is the change id of the compact history (version
// 1): fewer history events and Temporal actions for the same verdicts. Its
// string stays "lean-verification", as recorded histories carry it (the
// change was called lean when it was made).
//   - A pass is one local activity (activities.Pass: pull when asked, then
//     evaluate and store) instead of two: one marker per pass.
//   - A verdict change is published once in the history: one search
//     attribute upsert (verdict and provisional flag together); no memo
//     (the current details carry the summary for the UI, outside the
//     history).
//   - The pass before completing is skipped when the latest pass already
//     ran at or after the watch's end (it would re-read the same facts),
//     and its GetVersion is not asked for: a compact run always has it.
//   - The "pass-local-activities" and "final-pass-before-complete" versions
//     are implied (both 1) and not recorded again.
//
// Runs recorded before (no marker of this change) replay along the old
// path.
const changeCompactHistory = "lean-verification"

// isCompact reports whether this run takes the compact path, asking once per
// verification: the first pass records the marker, and the state carries
// the answer across continue-as-new (VerifyState.Compact).
func (v *verification) isCompact(ctx workflow.Context) bool {
	if !v.compactKnown {
		v.compact = v.state.Compact ||
			workflow.GetVersion(ctx, changeCompactHistory, workflow.DefaultVersion, 1) >= 1
		v.compactKnown = true
		v.state.Compact = v.compact
	}
	return v.compact
}

// finalPassNeeded reports whether the verification ends with a pass over
// everything stored (see run).
func (v *verification) finalPassNeeded(ctx workflow.Context) bool {
	if v.isCompact(ctx) {
		return v.state.LastPassAt.Before(v.in.WatchUntil)
	}
	return workflow.GetVersion(ctx, "final-pass-before-complete", workflow.DefaultVersion, 1) >= 1
}

// compactPass is pass's compact path: one local activity; the caller holds the
// pass mutex.
func (v *verification) compactPass(ctx workflow.Context, pull bool) error {
	v.state.LastPassAt = workflow.Now(ctx)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 3 * time.Minute, // a pull (2 min at most) and an evaluation
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrInvalidInput},
		},
	})
	// FreshAsOf lets the worker share the pull with the tenant's other
	// passes (activities.ExtractInput): facts as fresh as now, and fresher
	// than the pull this verification read last. A settlement re-read is a
	// second look: with a short window, the first pass's pull can start
	// after the window closed, and must not answer the re-read (a stale
	// first read would stand; the matrix's stale_read scenarios).
	// An input of the local activity only, so no GetVersion: replay does
	// not compare it.
	fresh := v.state.LastPassAt
	if !fresh.After(v.state.PulledAt) {
		fresh = v.state.PulledAt.Add(time.Nanosecond)
	}
	var res activities.PassResult
	if err := workflow.ExecuteLocalActivity(lctx, act.Pass, activities.PassInput{
		Pull:    pull,
		Extract: activities.ExtractInput{TenantID: v.in.TenantID, ActionID: v.in.ActionID, FreshAsOf: fresh},
		Evaluate: activities.EvaluateInput{
			TenantID:    v.in.TenantID,
			ActionID:    v.in.ActionID,
			StoreID:     v.in.StoreID,
			Unreachable: v.state.Unreachable, // replaced by the pull's when the pass pulls
			Provisional: v.state.Phase != PhaseWatching,
			Known:       v.state.Verdict.Version,
		},
	}).Get(ctx, &res); err != nil {
		return fmt.Errorf("pass: %w", err)
	}
	if res.Pulled {
		v.state.Unreachable = res.Unreachable
		if res.PulledAt.After(v.state.PulledAt) {
			v.state.PulledAt = res.PulledAt
		}
	}
	v.state.Passes++
	v.runPass++
	changed := res.Evaluate.Verdict.Version != v.state.Verdict.Version
	v.state.Verdict = res.Evaluate.Verdict
	v.hooks.wanted = res.Evaluate.Webhooks
	if changed {
		return v.publish(ctx)
	}
	return nil
}
