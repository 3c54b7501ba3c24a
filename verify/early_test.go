package verify_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
)

// Start runs the early pass while Temporal persists the start and returns
// only once both are over; an early pass that fails leaves the first
// verdict to the verification and fails nothing.
func TestStartRunsTheEarlyPassWithTheStart(t *testing.T) {
	c := dial(t)
	tenant := "t_verifyearly" + time.Now().Format("150405.000000")
	rec := func(id string) commitlayer.ActionRecord {
		return commitlayer.ActionRecord{Action: commitlayer.Action{ID: id, Contract: "c", Agent: "a", Subject: "order:o_1",
			RequestedAt: time.Now()}, SettlesAt: time.Now().Add(time.Minute), WatchUntil: time.Now().Add(time.Hour)}
	}
	var (
		ran       atomic.Int32
		sawWF     atomic.Bool
		finished  atomic.Bool
		failEarly atomic.Bool
		accepted  atomic.Bool
	)
	vc := &verify.Client{Temporal: c, Store: noStore{}, TaskQueue: "verify-test-nobody-polls"}
	vc.EarlyPass = func(ctx context.Context, tenantID, actionID string, started func(context.Context) bool) error {
		ran.Add(1)
		if tenantID != tenant {
			return errors.New("early pass for another tenant: " + tenantID)
		}
		// Concurrent with the start: give the start time to land, and look.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := c.DescribeWorkflow(ctx, workflows.VerifyWorkflowID(tenantID, actionID), ""); err == nil {
				sawWF.Store(true)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		finished.Store(true)
		accepted.Store(started(ctx))
		if failEarly.Load() {
			return errors.New("database away")
		}
		return nil
	}
	for _, id := range []string{"act_early", "act_early_fails"} {
		failEarly.Store(id == "act_early_fails")
		finished.Store(false)
		t.Cleanup(func() {
			_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, id), "", "test done")
		})
		require.NoError(t, vc.Start(context.Background(), tenant, rec(id)), id)
		require.True(t, finished.Load(), "%s: Start returned before its early pass was over", id)
		require.True(t, accepted.Load(), "%s: a start Temporal accepted", id)
	}
	require.EqualValues(t, 2, ran.Load())
	require.True(t, sawWF.Load(), "the early pass did not hold the start back")

	// A start Temporal refuses (an agent longer than a search attribute
	// takes): the early pass is told, and stores nothing.
	poisoned := rec("act_early_refused")
	poisoned.Agent = strings.Repeat("a", 3000)
	var refused *verify.StartRefusedError
	require.ErrorAs(t, vc.Start(context.Background(), tenant, poisoned), &refused)
	require.EqualValues(t, 3, ran.Load())
	require.False(t, accepted.Load(), "a refused start was reported accepted to the early pass")
}
