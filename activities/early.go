package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// errNotStarted ends an early pass whose verification's start was not
// accepted, before it stores anything.
var errNotStarted = errors.New("the verification's start was not accepted")

// EarlyPass runs a new action's first pass ahead of its verification, while
// Temporal persists the verification's start (verify.Client.EarlyPass): for
// a tenant without connectors the first pass has nothing to pull, so it is
// an evaluation of what is stored, and the provisional verdict it stores is
// the one the verification's own first pass would store. That pass still
// runs, evaluates again, and adds a version only when the answer changed
// (facts stored in between); it publishes the verdict and queues its
// webhook events (EvaluateInput.Known) either way.
//
// The verdict is stored only once started answers true: the caller's word
// that the verification's start was accepted. An action whose verification
// Temporal refused, or could not be reached to start, keeps no verdict from
// a verification that does not run (started answers false, or ctx ends
// first).
//
// It answers whether it stored the first verdict: false, storing nothing,
// for a tenant with connectors (their first pass pulls the systems of
// record first, and a verdict from before that pull could only be stale),
// for an action that has a verdict already, and for a start not accepted.
func (a *Activities) EarlyPass(ctx context.Context, tenantID, actionID, storeID string, started func(context.Context) bool) (bool, error) {
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
	appendFirst := func(ctx context.Context, tenantID string, v commitlayer.Verdict) (commitlayer.Verdict, bool, error) {
		if !started(ctx) {
			return commitlayer.Verdict{}, false, errNotStarted
		}
		return a.Store.AppendFirstVerdict(ctx, tenantID, v)
	}
	_, stored, err := a.evaluateWith(ctx, EvaluateInput{TenantID: tenantID, ActionID: actionID, StoreID: storeID, Provisional: true},
		appendFirst)
	if errors.Is(err, errNotStarted) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("early pass: %w", err)
	}
	return stored, nil
}
