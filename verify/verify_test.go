package verify_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
	enumspb "go.temporal.io/api/enums/v1"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func dial(t *testing.T) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: testenv.TemporalAddress(t), Namespace: testenv.Namespace()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestStartIsIdempotentAndRecheckOfUnknownIsNotRunning(t *testing.T) {
	c := dial(t)
	// A task queue no worker polls: the workflow is started, never run.
	vc := &verify.Client{Temporal: c, TaskQueue: "verify-test-nobody-polls"}
	ctx := context.Background()
	tenant := "t_verifytest" + time.Now().Format("150405.000000")
	rec := commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_1", Contract: "c", Agent: "a", Subject: "order:o_1",
		RequestedAt: time.Now()}, SettlesAt: time.Now().Add(time.Minute), WatchUntil: time.Now().Add(time.Hour)}
	require.NoError(t, vc.Start(ctx, tenant, rec))
	require.NoError(t, vc.Start(ctx, tenant, rec), "starting an existing verification is not an error")
	t.Cleanup(func() {
		_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, "act_1"), "", "test done")
	})
	d, err := c.DescribeWorkflow(ctx, workflows.VerifyWorkflowID(tenant, "act_1"), "")
	require.NoError(t, err)
	require.Equal(t, "VerifyAction", d.WorkflowType.Name)

	_, err = vc.Recheck(ctx, tenant, "act_never_recorded")
	require.True(t, errors.Is(err, verify.ErrNotRunning), "%v", err)
}

func TestSignalIgnoresEndedVerifications(t *testing.T) {
	c := dial(t)
	// No workflow exists for the action (its verification ended):
	// signalling it is not an error.
	vc := &verify.Client{Temporal: c}
	require.NoError(t, vc.Signal(context.Background(), "t_nobody", []commitlayer.ActionRecord{{Action: commitlayer.Action{ID: "act_gone"}}}))
	require.NoError(t, vc.Signal(context.Background(), "t_nobody", nil))
}

// signalsOf counts the facts-arrived signals in a workflow's history.
func signalsOf(t *testing.T, c client.Client, workflowID string) int {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == workflows.SignalFactsArrived {
			n++
		}
	}
	return n
}

// TestSignalSignalsEachVerification: each verification given gets one
// facts-arrived signal, read back from its history on the dev server; the
// others none.
func TestSignalSignalsEachVerification(t *testing.T) {
	c := dial(t)
	ctx := context.Background()
	tenant := "t_signaltest" + time.Now().Format("150405.000000")
	rec := func(id string) commitlayer.ActionRecord {
		return commitlayer.ActionRecord{Action: commitlayer.Action{ID: id, Contract: "c", Agent: "a", Subject: "order:o_1",
			RequestedAt: time.Now()}, SettlesAt: time.Now().Add(time.Minute), WatchUntil: time.Now().Add(time.Hour)}
	}
	a, b, idle := rec("act_a"), rec("act_b"), rec("act_idle")
	// A task queue no worker polls: the workflows are started, never run,
	// so their histories hold exactly what was sent to them.
	vc := &verify.Client{Temporal: c, TaskQueue: "verify-test-nobody-polls"}
	for _, r := range []commitlayer.ActionRecord{a, b, idle} {
		require.NoError(t, vc.Start(ctx, tenant, r))
	}
	t.Cleanup(func() {
		for _, id := range []string{"act_a", "act_b", "act_idle"} {
			_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, id), "", "test done")
		}
	})
	wid := func(id string) string { return workflows.VerifyWorkflowID(tenant, id) }
	require.NoError(t, vc.Signal(ctx, tenant, []commitlayer.ActionRecord{a, b}))
	require.NoError(t, vc.Signal(ctx, tenant, []commitlayer.ActionRecord{a}))
	require.Equal(t, 2, signalsOf(t, c, wid("act_a")))
	require.Equal(t, 1, signalsOf(t, c, wid("act_b")))
	require.Zero(t, signalsOf(t, c, wid("act_idle")))
}
