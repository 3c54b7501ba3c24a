package verify_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
)

// wakeRecorder records how each notice went: a plain signal, or a
// signal-with-start with its options and input.
type wakeRecorder struct {
	client.Client // nil: only the two calls below are made
	mu            sync.Mutex
	plain         []string
	started       map[string]client.StartWorkflowOptions
	inputs        map[string]workflows.VerifyActionInput
	swsErr        error
}

func (r *wakeRecorder) SignalWorkflow(_ context.Context, workflowID, _ string, name string, _ any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name != workflows.SignalFactsArrived {
		return errors.New("unexpected signal " + name)
	}
	r.plain = append(r.plain, workflowID)
	return nil
}

func (r *wakeRecorder) SignalWithStartWorkflow(_ context.Context, workflowID, signal string, _ any,
	opts client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if signal != workflows.SignalFactsArrived {
		return nil, errors.New("unexpected signal " + signal)
	}
	r.started[workflowID] = opts
	r.inputs[workflowID] = args[0].(workflows.VerifyActionInput)
	return nil, r.swsErr
}

// TestNoticesWakeWhatMayBeAsleep: with dormancy, a verification old enough
// to be asleep gets its notice by signal-with-start (which wakes a sleeping
// run), carrying the start a verification of that action has, attached to
// a running one rather than refused; a young one gets a plain signal (its
// starter may not have started it yet); one whose start Temporal refused
// A closed verification (the start refused as a duplicate) is not an
// error.
func TestNoticesWakeWhatMayBeAsleep(t *testing.T) {
	now := time.Now()
	d := workflows.Dormancy{MinWait: time.Hour, MinAge: 2 * time.Minute}
	rec := func(id string, age time.Duration) commitlayer.ActionRecord {
		return commitlayer.ActionRecord{Action: commitlayer.Action{ID: id, Contract: "payout", Agent: "agent-1", Subject: "account:a_1"},
			CreatedAt: now.Add(-age), SettlesAt: now.Add(-age + time.Minute), WatchUntil: now.Add(-age + 72*time.Hour)}
	}
	old, young, edge := rec("act_old", time.Hour), rec("act_young", 10*time.Second), rec("act_edge", d.WakeByStart()+time.Second)
	r := &wakeRecorder{started: map[string]client.StartWorkflowOptions{}, inputs: map[string]workflows.VerifyActionInput{}}
	vc := &verify.Client{Temporal: r, TaskQueue: "tq", StoreID: "db_1", Dormancy: d}
	all := []commitlayer.ActionRecord{old, young, edge}
	require.NoError(t, vc.Signal(context.Background(), "t_1", all))

	require.Equal(t, []string{workflows.VerifyWorkflowID("t_1", "act_young")}, r.plain)
	require.Len(t, r.started, 2)
	for _, a := range []commitlayer.ActionRecord{old, edge} {
		id := workflows.VerifyWorkflowID("t_1", a.ID)
		opts, ok := r.started[id]
		require.True(t, ok, a.ID)
		require.Equal(t, id, opts.ID)
		require.Equal(t, "tq", opts.TaskQueue)
		require.Equal(t, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, opts.WorkflowIDReusePolicy, "a closed verification is not started again")
		require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, opts.WorkflowIDConflictPolicy)
		require.False(t, opts.EnableEagerStart)
		in := r.inputs[id]
		require.Equal(t, workflows.VerifyActionInput{TenantID: "t_1", ActionID: a.ID, SettlesAt: a.SettlesAt,
			WatchUntil: a.WatchUntil, StoreID: "db_1", Dormancy: &d}, in)
	}

	// Closed: Temporal refuses the start as a duplicate; the notice is done.
	r.swsErr = serviceerror.NewWorkflowExecutionAlreadyStarted("closed", "", "")
	require.NoError(t, vc.Signal(context.Background(), "t_1", all))
	// Temporal away: the notice fails (the outbox keeps it).
	r.swsErr = serviceerror.NewUnavailable("away")
	require.Error(t, vc.Signal(context.Background(), "t_1", all))
}

// Without dormancy every notice is a plain signal, whatever the age.
func TestNoticesWithoutDormancyArePlainSignals(t *testing.T) {
	old := commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_old"}, CreatedAt: time.Now().Add(-time.Hour)}
	r := &wakeRecorder{started: map[string]client.StartWorkflowOptions{}, inputs: map[string]workflows.VerifyActionInput{}}
	vc := &verify.Client{Temporal: r}
	require.NoError(t, vc.Signal(context.Background(), "t_1", []commitlayer.ActionRecord{old}))
	require.Equal(t, []string{workflows.VerifyWorkflowID("t_1", "act_old")}, r.plain)
	require.Empty(t, r.started)
}
