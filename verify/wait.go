package verify

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// Wait starts the verification of a stored action unless it runs already,
// and waits in the same call (Temporal's update-with-start) until it has a
// verdict at the stage asked: the first verdict, or with final one that is
// not provisional. Nothing polls: the workflow answers the update when its
// verdict gets there.
//
// fresh says the action was just recorded (or never marked started): the
// start's bookkeeping (Start's) is done once the update is accepted.
//
// It returns the verdict and whether it is at the stage (false when the
// run ended before it: it continued as new); ctx's error when ctx ended first (the
// verification may or may not have started: Start again, it is
// idempotent); ErrNotRunning when the verification has ended (its stored
// verdicts are all there is).
func (c *Client) Wait(ctx context.Context, tenantID string, a commitlayer.ActionRecord, final, fresh bool) (commitlayer.Verdict, bool, error) {
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
		return commitlayer.Verdict{}, false, fmt.Errorf("wait for verdict of %s: start: %w", a.ID, err)
	}
	if fresh {
		if err := c.started(ctx, tenantID, a); err != nil {
			return commitlayer.Verdict{}, false, err
		}
	}
	var res workflows.WaitVerdictResult
	if err := h.Get(ctx, &res); err != nil {
		return commitlayer.Verdict{}, false, fmt.Errorf("wait for verdict of %s: %w", a.ID, err)
	}
	return res.Verdict, res.Reached, nil
}
