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
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// noStore answers as a tenant with no watched actions and no connectors.
type noStore struct{ watched []postgres.ActionRecord }

func (s noStore) WatchedActions(context.Context, string, []commitlayer.Subject, time.Time) ([]postgres.ActionRecord, error) {
	return s.watched, nil
}
func (noStore) ListConnectors(context.Context, string) ([]postgres.Connector, error) { return nil, nil }

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
	vc := &verify.Client{Temporal: c, Store: noStore{}, TaskQueue: "verify-test-nobody-polls"}
	ctx := context.Background()
	tenant := "t_verifytest" + time.Now().Format("150405.000000")
	rec := postgres.ActionRecord{Action: commitlayer.Action{ID: "act_1", Contract: "c", Agent: "a", Subject: "order:o_1",
		RequestedAt: time.Now()}, SettlesAt: time.Now().Add(time.Minute), WatchUntil: time.Now().Add(time.Hour)}
	require.NoError(t, vc.Start(ctx, tenant, rec))
	require.NoError(t, vc.Start(ctx, tenant, rec), "starting an existing verification is not an error")
	t.Cleanup(func() {
		_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, "act_1"), "", "test done")
	})
	d, err := c.DescribeWorkflowExecution(ctx, workflows.VerifyWorkflowID(tenant, "act_1"), "")
	require.NoError(t, err)
	require.Equal(t, "VerifyAction", d.WorkflowExecutionInfo.Type.Name)

	_, err = vc.Recheck(ctx, tenant, "act_never_recorded")
	require.True(t, errors.Is(err, verify.ErrNotRunning), "%v", err)
	_, err = vc.Current(ctx, tenant, "act_never_recorded")
	require.True(t, errors.Is(err, verify.ErrNotRunning), "%v", err)
}

func TestNotifyFactsIgnoresEndedVerifications(t *testing.T) {
	c := dial(t)
	// The store says an action is watched, but no workflow exists for it
	// (its verification ended): nudging it is not an error.
	vc := &verify.Client{Temporal: c, Store: noStore{watched: []postgres.ActionRecord{
		{Action: commitlayer.Action{ID: "act_gone"}},
	}}}
	require.NoError(t, vc.FactsArrived(context.Background(), "t_nobody", []commitlayer.Subject{"order:o_1"}))
	require.NoError(t, vc.NotifyFacts(context.Background(), "t_nobody", nil, ""))
}
