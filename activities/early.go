package activities

import (
	"context"
	"fmt"
)

// EarlyPass runs a new action's first pass ahead of its verification, while
// Temporal persists the verification's start (verify.Client.EarlyPass): for
// a tenant without connectors the first pass has nothing to pull, so it is
// an evaluation of what is stored, and the provisional verdict it stores is
// the one the verification's own first pass would store. That pass still
// runs, evaluates again, and adds a version only when the answer changed
// (facts stored in between); it publishes the verdict and queues its
// webhook events (EvaluateInput.Known) either way.
//
// It runs beside the start, so the start's outcome is not known yet: a
// start Temporal refuses marks the action failed and deletes the verdict
// stored here with it (postgres StartFailed); one Temporal was not there to
// take keeps it, and the verification started later finds it.
//
// It answers whether it stored the first verdict: false, storing nothing,
// for a tenant with connectors (their first pass pulls the systems of
// record first, and a verdict from before that pull could only be stale),
// and for an action that has a verdict already.
func (a *Activities) EarlyPass(ctx context.Context, tenantID, actionID, storeID string) (bool, error) {
	conns, err := a.Store.ListConnectors(ctx, tenantID)
	if err != nil {
		return false, fmt.Errorf("early pass: list connectors: %w", err)
	}
	if len(conns) > 0 {
		return false, nil
	}
	// Stored only as the first verdict: when the verification's own pass
	// got there first (a worker elsewhere took its first task at once), its
	// answer stands, whatever came after it.
	_, stored, err := a.evaluateWith(ctx, EvaluateInput{TenantID: tenantID, ActionID: actionID, StoreID: storeID, Provisional: true},
		a.Store.AppendFirstVerdict, passReads{})
	if err != nil {
		return false, fmt.Errorf("early pass: %w", err)
	}
	return stored, nil
}
