package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/activities"
)

// PollConnectorsInput starts a tenant's connector poller.
type PollConnectorsInput struct {
	TenantID string
	// Interval between pulls; zero means DefaultPollInterval.
	Interval time.Duration
	// Polls made by earlier runs (continue-as-new).
	Polls int
}

// DefaultPollInterval is how often a tenant's connectors are pulled while it
// has open verifications.
const DefaultPollInterval = time.Minute

// pollsPerRun bounds a poller's run before it continues as new.
const pollsPerRun = 100

// PollConnectors pulls a tenant's connectors at an interval for as long as
// the tenant has verifications still watching, so that a reversal recorded
// in a system of record reaches the verifications of its subject (the pull
// signals them). It ends when nothing is watched; starting a verification
// starts it again.
func PollConnectors(ctx workflow.Context, in PollConnectorsInput) (int, error) {
	if in.TenantID == "" {
		return 0, temporal.NewNonRetryableApplicationError("tenant id is required", activities.ErrInvalidInput, nil)
	}
	interval := in.Interval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumInterval:        time.Minute,
			MaximumAttempts:        5,
			NonRetryableErrorTypes: []string{activities.ErrInvalidInput},
		},
	})
	polls := in.Polls
	for range pollsPerRun {
		if err := workflow.Sleep(ctx, interval); err != nil {
			return polls, err
		}
		var open int
		if err := workflow.ExecuteActivity(actx, act.OpenVerifications, in.TenantID).Get(ctx, &open); err != nil {
			return polls, fmt.Errorf("count open verifications: %w", err)
		}
		if open == 0 {
			return polls, nil
		}
		var res activities.ExtractResult
		if err := workflow.ExecuteActivity(actx, act.Extract, activities.ExtractInput{TenantID: in.TenantID}).Get(ctx, &res); err != nil {
			// A pull that keeps failing is recorded on the connector; the
			// poller carries on at the next interval.
			workflow.GetLogger(ctx).Warn("connector pull failed", "tenant", in.TenantID, "error", err)
		}
		polls++
	}
	next := in
	next.Polls = polls
	return polls, workflow.NewContinueAsNewError(ctx, PollConnectors, next)
}
