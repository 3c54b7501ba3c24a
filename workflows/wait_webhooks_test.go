package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/client/webhook"
)

// waitFor sends a wait-verdict update at d and returns where its result
// will be.
func waitFor(t *testing.T, env *testsuite.TestWorkflowEnvironment, id string, final bool, d time.Duration) *WaitVerdictResult {
	out := &WaitVerdictResult{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateWaitVerdict, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("wait %s rejected: %v", id, err) },
			OnAccept: func() {},
			OnComplete: func(res any, err error) {
				require.NoError(t, err)
				*out = res.(WaitVerdictResult)
			},
		}, WaitVerdictInput{Final: final})
	}, d)
	return out
}

func TestWaitUpdateAnswersAtTheStage(t *testing.T) {
	_, env, in := newWorld(t, pass)
	prov := waitFor(t, env, "prov", false, time.Minute)
	final := waitFor(t, env, "final", true, time.Minute)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	require.True(t, prov.Reached)
	require.True(t, prov.Verdict.Provisional)
	require.Equal(t, 1, prov.Verdict.Version)
	require.True(t, final.Reached)
	require.False(t, final.Verdict.Provisional)
	require.False(t, final.Verdict.EvaluatedAt.Before(in.SettlesAt), "answered after settlement, not before")
}

// A waiter for the final verdict does not hold a run that must continue
// as new while it settles: it answers (not reached) and the run goes on.
func TestWaitDoesNotHoldContinueAsNew(t *testing.T) {
	_, env, in := newWorld(t, pass)
	final := waitFor(t, env, "final", true, time.Second)
	for i := range maxPassesPerRun + 5 {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(SignalFactsArrived, FactsArrived{})
		}, time.Duration(i+2)*time.Second) // all before settlement
	}
	env.ExecuteWorkflow(VerifyAction, in)
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	require.False(t, final.Reached)
	require.True(t, final.Verdict.Provisional)
}

// deliveries records DeliverWebhooks calls; the first attempt of each
// event fails.
type deliveries struct {
	mu       sync.Mutex
	attempts map[string]int
	done     []webhook.Event
}

func (d *deliveries) deliver(_ context.Context, in activities.DeliverWebhooksInput) (activities.DeliverWebhooksResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.attempts[in.Event.ID]++
	if d.attempts[in.Event.ID] == 1 {
		return activities.DeliverWebhooksResult{}, errors.New("receiver down")
	}
	d.done = append(d.done, in.Event)
	return activities.DeliverWebhooksResult{Delivered: 1}, nil
}

func TestWebhookEventsDeliveredInOrder(t *testing.T) {
	n := 0
	w, env, in := newWorld(t, func(*world, activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
		n++
		if n == 1 {
			return commitlayer.StatusFail, nil // stale first read, corrected at settlement
		}
		return commitlayer.StatusPass, nil
	})
	w.webhooks = true
	d := &deliveries{attempts: map[string]int{}}
	env.OnActivity(act.DeliverWebhooks, mock.Anything, mock.Anything).Return(d.deliver)
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Equal(t, 2, res.Verdict.Version)

	var got []string
	for _, e := range d.done {
		got = append(got, e.Type+"@"+string(rune('0'+e.Sequence)))
		require.Equal(t, EventID(in.TenantID, in.ActionID, e.Type, e.Sequence), e.ID)
		require.Equal(t, e.Sequence, e.Verdict.Version)
		require.Equal(t, "act_1", e.ActionID)
	}
	require.Equal(t, []string{"verdict.changed@1", "verdict.changed@2", "verdict.final@2"}, got)
	for id, a := range d.attempts {
		require.Equal(t, 2, a, "%s: retried once after its failure", id)
	}
	require.NotEqual(t, EventID("t_1", "act_1", webhook.EventVerdictChanged, 2), EventID("t_1", "act_1", webhook.EventVerdictFinal, 2))
	require.NotEqual(t, EventID("t_1", "act_1", webhook.EventVerdictFinal, 2), EventID("t_2", "act_1", webhook.EventVerdictFinal, 2))
}

// Events still queued when a run continued as new are delivered by the
// next one, first.
func TestWebhookQueueSurvivesContinueAsNew(t *testing.T) {
	w, env, in := newWorld(t, pass)
	w.webhooks = true
	queued := webhook.Event{ID: "evt_carried", Type: webhook.EventVerdictFinal, ActionID: "act_1", Sequence: 2,
		Verdict: commitlayer.Verdict{ActionID: "act_1", Status: commitlayer.StatusPass, Version: 2}}
	in.Resume = &VerifyState{Phase: PhaseWatching, Verdict: queued.Verdict, Passes: 3,
		Webhooks: &WebhookState{Queue: []webhook.Event{queued}, FinalSent: true}}
	w.latest = queued.Verdict
	d := &deliveries{attempts: map[string]int{"evt_carried": 1}} // its first attempt was in the last run
	env.OnActivity(act.DeliverWebhooks, mock.Anything, mock.Anything).Return(d.deliver)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	require.NotEmpty(t, d.done)
	require.Equal(t, "evt_carried", d.done[0].ID, "the carried event goes first")
	for _, e := range d.done[1:] {
		require.Greater(t, e.Sequence, queued.Sequence, "then this run's own")
	}
}

// A tenant without webhooks: no delivery is scheduled at all.
func TestNoWebhooksNoDeliveries(t *testing.T) {
	_, env, in := newWorld(t, pass)
	d := &deliveries{attempts: map[string]int{}}
	env.OnActivity(act.DeliverWebhooks, mock.Anything, mock.Anything).Return(d.deliver).Maybe()
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	require.Empty(t, d.attempts)
}
