package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// lastAttempt follows the workflow's policy (1 s doubling, 10 min at
// most) against a 24 h window, and a Retry-After in place of the policy.
func TestLastAttempt(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	policy := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Minute}
	info := func(attempt int32) activity.Info {
		return activity.Info{ScheduledTime: start, ScheduleToCloseTimeout: 24 * time.Hour, Attempt: attempt, RetryPolicy: policy}
	}
	end := start.Add(24 * time.Hour)
	for _, c := range []struct {
		name       string
		info       activity.Info
		retryAfter time.Duration
		now        time.Time
		last       bool
	}{
		{"first attempt", info(1), 0, start, false},
		{"next in 1 s, 2 s before the end", info(1), 0, end.Add(-2 * time.Second), false},
		{"next in 1 s, at the end", info(1), 0, end.Add(-time.Second), true},
		{"attempt 12: next in 10 min, 11 min before", info(12), 0, end.Add(-11 * time.Minute), false},
		{"attempt 12: next in 10 min, 9 min before", info(12), 0, end.Add(-9 * time.Minute), true},
		{"attempt 5: next in 16 s, 15 s before", info(5), 0, end.Add(-15 * time.Second), true},
		{"Retry-After 1 h, 2 h before", info(3), time.Hour, end.Add(-2 * time.Hour), false},
		{"Retry-After 1 h, 30 min before", info(3), time.Hour, end.Add(-30 * time.Minute), true},
		{"no window", activity.Info{Attempt: 3, RetryPolicy: policy}, 0, end, false},
		{"no policy", activity.Info{ScheduledTime: start, ScheduleToCloseTimeout: time.Hour, Attempt: 3}, 0, start.Add(2 * time.Hour), false},
		{"attempts used up", activity.Info{ScheduledTime: start, ScheduleToCloseTimeout: 24 * time.Hour, Attempt: 3,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}}, 0, start, true},
	} {
		require.Equal(t, c.last, lastAttempt(c.info, c.retryAfter, c.now), c.name)
	}
}
