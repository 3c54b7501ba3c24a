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

// noStore answers as a tenant with no watched actions and no connectors;
// links, when set, maps a subject to the subjects linked to it.
type noStore struct {
	watched []commitlayer.ActionRecord
	links   map[commitlayer.Subject][]commitlayer.Subject
	asked   *[]commitlayer.Subject
}

func (s noStore) WatchedActions(_ context.Context, _ string, subjects []commitlayer.Subject, _ time.Time) ([]commitlayer.ActionRecord, error) {
	if s.asked != nil {
		*s.asked = append([]commitlayer.Subject(nil), subjects...)
	}
	return s.watched, nil
}

func (s noStore) LinkedSubjects(_ context.Context, _ string, subjects []commitlayer.Subject) ([]commitlayer.Subject, error) {
	var out []commitlayer.Subject
	for _, sub := range subjects {
		out = append(out, s.links[sub]...)
	}
	return out, nil
}
func (noStore) VerificationStarted(context.Context, string, string) error { return nil }
func (noStore) StartFailed(context.Context, string, string, string) (bool, error) {
	return true, nil
}

func (noStore) ListConnectors(context.Context, string) ([]commitlayer.Connector, error) {
	return nil, nil
}

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
	_, err = vc.Current(ctx, tenant, "act_never_recorded")
	require.True(t, errors.Is(err, verify.ErrNotRunning), "%v", err)
}

func TestNotifyFactsIgnoresEndedVerifications(t *testing.T) {
	c := dial(t)
	// The store says an action is watched, but no workflow exists for it
	// (its verification ended): nudging it is not an error.
	vc := &verify.Client{Temporal: c, Store: noStore{watched: []commitlayer.ActionRecord{
		{Action: commitlayer.Action{ID: "act_gone"}},
	}}}
	require.NoError(t, vc.FactsArrived(context.Background(), "t_nobody", []commitlayer.Subject{"order:o_1"}, nil))
	require.NoError(t, vc.NotifyFacts(context.Background(), "t_nobody", nil, nil, ""))
}

func TestNotifyFactsReachesTwoHops(t *testing.T) {
	// No workflow is signalled (none watched); what matters is which
	// subjects the watched actions are looked up for.
	var asked []commitlayer.Subject
	st := noStore{asked: &asked, links: map[commitlayer.Subject][]commitlayer.Subject{
		"order:o_1":    {"customer:c_1", "ticket:t_1"},
		"customer:c_1": {"order:o_1", "subscription:sub_1"},
		"ticket:t_1":   {"order:o_1"},
		// three hops: not reached
		"subscription:sub_1": {"plan:p_9"},
	}}
	vc := &verify.Client{Store: st}
	require.NoError(t, vc.NotifyFacts(context.Background(), "t_1", []commitlayer.Subject{"order:o_1"}, nil, ""))
	require.ElementsMatch(t, []commitlayer.Subject{"order:o_1", "customer:c_1", "ticket:t_1", "subscription:sub_1"}, asked)
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

// TestNotifyFactsSignalsWatchedVerifications: the verifications the store
// says watch the subjects get one facts-arrived signal each, read back from
// their histories on the dev server; the excepted one and those not
// watched get none, and no subjects signal nobody. Starting a verification
// nudges the earlier ones on its subject, never itself.
func TestNotifyFactsSignalsWatchedVerifications(t *testing.T) {
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
	const queue = "verify-test-nobody-polls"
	quiet := &verify.Client{Temporal: c, Store: noStore{}, TaskQueue: queue}
	for _, r := range []commitlayer.ActionRecord{a, idle} {
		require.NoError(t, quiet.Start(ctx, tenant, r))
	}
	t.Cleanup(func() {
		for _, id := range []string{"act_a", "act_b", "act_idle"} {
			_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, id), "", "test done")
		}
	})
	wid := func(id string) string { return workflows.VerifyWorkflowID(tenant, id) }
	require.Zero(t, signalsOf(t, c, wid("act_a")))

	// b starts while a watches the subject: a is nudged, b is not.
	watching := &verify.Client{Temporal: c, Store: noStore{watched: []commitlayer.ActionRecord{a, b}}, TaskQueue: queue}
	require.NoError(t, watching.Start(ctx, tenant, b))
	require.Equal(t, 1, signalsOf(t, c, wid("act_a")))
	require.Zero(t, signalsOf(t, c, wid("act_b")), "a verification is not nudged by its own start")

	require.NoError(t, watching.NotifyFacts(ctx, tenant, []commitlayer.Subject{"order:o_1"}, nil, "act_b"))
	require.Equal(t, 2, signalsOf(t, c, wid("act_a")))
	require.Zero(t, signalsOf(t, c, wid("act_b")), "the excepted verification")

	require.NoError(t, watching.NotifyFacts(ctx, tenant, nil, nil, ""))
	require.Equal(t, 2, signalsOf(t, c, wid("act_a")), "no subjects, no signal")

	require.NoError(t, watching.FactsArrived(ctx, tenant, []commitlayer.Subject{"order:o_1"}, nil))
	require.Equal(t, 3, signalsOf(t, c, wid("act_a")))
	require.Equal(t, 1, signalsOf(t, c, wid("act_b")))
	require.Zero(t, signalsOf(t, c, wid("act_idle")), "a verification the store does not list as watching")
}
