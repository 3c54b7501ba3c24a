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
// once both are over (within the grace); an early pass that fails leaves
// the first verdict to the verification and fails nothing; one slower than
// the grace does not hold an accepted start's answer back.
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
	)
	store := &failedAfter{finished: &finished}
	vc := &verify.Client{Temporal: c, Store: store, TaskQueue: "verify-test-nobody-polls", EarlyPassGrace: time.Minute}
	vc.EarlyPass = func(ctx context.Context, tenantID, actionID string) error {
		ran.Add(1)
		if tenantID != tenant {
			return errors.New("early pass for another tenant: " + tenantID)
		}
		// Concurrent with the start: give the start time to land, and look.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := c.DescribeWorkflow(ctx, workflows.VerifyWorkflowID(tenantID, actionID), ""); err == nil {
				sawWF.Store(true)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		finished.Store(true)
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
	}
	require.EqualValues(t, 2, ran.Load())
	require.True(t, sawWF.Load(), "the early pass did not hold the start back")

	require.Zero(t, store.calls.Load())

	// A start Temporal refuses (an agent longer than a search attribute
	// takes) is marked failed, which deletes the early verdict, only once
	// the early pass is over.
	poisoned := rec("act_early_refused")
	poisoned.Agent = strings.Repeat("a", 3000)
	finished.Store(false)
	var refused *verify.StartRefusedError
	require.ErrorAs(t, vc.Start(context.Background(), tenant, poisoned), &refused)
	require.EqualValues(t, 3, ran.Load())
	require.EqualValues(t, 1, store.calls.Load())
	require.True(t, store.afterEarly.Load(), "the refused start was marked failed while its early pass could still store a verdict")

	// An early pass slower than the grace: Start answers while it still
	// runs (it would wait forever here otherwise), and it finishes after.
	release, over := make(chan struct{}), make(chan struct{})
	slow := &verify.Client{Temporal: c, Store: noStore{}, TaskQueue: "verify-test-nobody-polls", EarlyPassGrace: time.Millisecond}
	slow.EarlyPass = func(ctx context.Context, _, _ string) error {
		defer close(over)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.Cleanup(func() {
		_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, "act_early_slow"), "", "test done")
	})
	require.NoError(t, slow.Start(context.Background(), tenant, rec("act_early_slow")))
	select {
	case <-over:
		t.Fatal("the early pass was over before it was released")
	default:
	}
	close(release)
	<-over
}

// failedAfter records whether StartFailed came after the early pass was
// over.
type failedAfter struct {
	noStore
	finished   *atomic.Bool
	calls      atomic.Int32
	afterEarly atomic.Bool
}

func (f *failedAfter) StartFailed(context.Context, string, string, string) (bool, error) {
	f.calls.Add(1)
	f.afterEarly.Store(f.finished.Load())
	return true, nil
}
