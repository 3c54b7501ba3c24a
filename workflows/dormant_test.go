package workflows

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
)

var testDormancy = Dormancy{MinWait: 10 * time.Minute, MinAge: 2 * time.Minute}

// runEnv is a fresh test environment on the same world: the next run of a
// verification that continued as new, started at start.
func runEnv(w *world, start time.Time) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	w.mu.Lock()
	w.env = env
	w.mu.Unlock()
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(act.Extract, mock.Anything, mock.Anything).Return(w.extract)
	env.OnActivity(act.Evaluate, mock.Anything, mock.Anything).Return(w.evaluate)
	env.OnActivity(act.Pass, mock.Anything, mock.Anything).Return(w.pass)
	env.OnActivity(act.EndWatch, mock.Anything, mock.Anything).Return(w.endWatchAct)
	return env
}

func sameTime(t *testing.T, want, got time.Time, msg string) {
	t.Helper()
	require.True(t, want.Equal(got), "%s: want %s, got %s", msg, want.UTC(), got.UTC())
}

// nap is a run that ended by going to sleep: when, for how long, and the
// input of the run that follows.
type nap struct {
	at      time.Time
	backoff time.Duration
	next    VerifyActionInput
}

// asleep requires the run to have ended with a continue-as-new that
// sleeps, and returns it.
func asleep(t *testing.T, env *testsuite.TestWorkflowEnvironment) nap {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	require.Equal(t, "VerifyAction", can.WorkflowType.Name)
	var next VerifyActionInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.Resume)
	return nap{at: env.Now(), backoff: can.BackoffStartInterval, next: next}
}

// A verification allowed to sleep runs its provisional pass and its
// settlement awake (the wait to settlement starts before it is old enough
// and ends before another MinWait), then sleeps through the whole watch:
// its next run starts at the watch's end, makes the pass over everything
// stored and completes.
func TestVerifySleepsThroughTheWatch(t *testing.T) {
	w, env, in := newWorld(t, pass)
	start := env.Now()
	in.Dormancy = &testDormancy
	env.ExecuteWorkflow(VerifyAction, in)
	n := asleep(t, env)
	require.Len(t, w.evals, 2, "provisional and final, awake")
	require.False(t, w.evals[1].Provisional)
	require.False(t, n.at.Before(in.SettlesAt))
	sameTime(t, in.WatchUntil, n.at.Add(n.backoff), "the next run starts at the watch's end")
	require.Equal(t, PhaseWatching, n.next.Resume.Phase)
	require.Equal(t, 1, n.next.Resume.Naps)
	sameTime(t, start, n.next.Resume.Since, "the first run's start travels")
	require.Equal(t, 2, n.next.Resume.Verdict.Version)
	require.Equal(t, in.Dormancy, n.next.Dormancy)

	env = runEnv(w, in.WatchUntil)
	env.ExecuteWorkflow(VerifyAction, n.next)
	res := result(t, env)
	require.Len(t, w.evals, 3, "the pass over everything stored before completing")
	require.Equal(t, 3, res.Passes)
	require.Equal(t, 2, res.Verdict.Version)
}

// Woken early by new facts (a signal-with-start skips the delay: the run
// starts with the signal in its history), the run makes its pass and goes
// back to sleep until the same deadline.
func TestVerifyWokenBySignalPassesAndSleepsAgain(t *testing.T) {
	reversed := false
	w, env, in := newWorld(t, func(*world, activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
		if reversed {
			return commitlayer.StatusFail, []commitlayer.Finding{{Code: commitlayer.CodeEffectReversed, Check: "payout", Lens: commitlayer.LensOutcome}}
		}
		return commitlayer.StatusPass, nil
	})
	in.Dormancy = &testDormancy
	env.ExecuteWorkflow(VerifyAction, in)
	n := asleep(t, env)

	wake := in.SettlesAt.Add(24 * time.Hour)
	reversed = true
	env = runEnv(w, wake)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalFactsArrived, FactsArrived{}) }, 0)
	env.ExecuteWorkflow(VerifyAction, n.next)
	n2 := asleep(t, env)
	require.Len(t, w.evals, 3, "one pass for the wake")
	sameTime(t, wake, n2.at, "asleep again at once")
	sameTime(t, in.WatchUntil, n2.at.Add(n2.backoff), "")
	require.Equal(t, 2, n2.next.Resume.Naps)
	require.Equal(t, commitlayer.StatusFail, n2.next.Resume.Verdict.Status)
	require.Equal(t, 3, n2.next.Resume.Verdict.Version)
	require.Len(t, w.extracts, 2, "a wake re-evaluates; it does not pull")
}

// Younger than MinAge a verification stays awake: notices to it are plain
// signals. It sleeps the moment it is old enough, with nothing to wake it.
func TestVerifySleepsOnlyOnceOldEnough(t *testing.T) {
	w, env, in := newWorld(t, pass)
	start := env.Now()
	in.SettlesAt = start // settled at once: provisional and final, then the watch
	in.Dormancy = &testDormancy
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalFactsArrived, FactsArrived{}) }, time.Minute)
	env.ExecuteWorkflow(VerifyAction, in)
	n := asleep(t, env)
	sameTime(t, start.Add(testDormancy.MinAge), n.at, "")
	require.Len(t, w.evals, 3, "provisional, final, and the signal's pass at one minute, awake")
	sameTime(t, in.WatchUntil, n.at.Add(n.backoff), "")
}

// A wait shorter than MinWait is kept on the timer: no continue-as-new.
func TestVerifyShortWaitStaysAwake(t *testing.T) {
	_, env, in := newWorld(t, pass)
	in.WatchUntil = in.SettlesAt.Add(5 * time.Minute)
	in.Dormancy = &testDormancy
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Equal(t, 3, res.Passes)
}

// A waiter for the final verdict keeps the run awake through settlement
// (a sleeping run would leave it waiting); once answered, the run sleeps
// through the watch.
func TestVerifyStaysAwakeWhileAWaiterWaits(t *testing.T) {
	w, env, in := newWorld(t, pass)
	in.SettlesAt = env.Now().Add(time.Hour)
	in.WatchUntil = in.SettlesAt.Add(watch)
	in.Dormancy = &testDormancy
	final := waitFor(t, env, "final", true, time.Minute)
	env.ExecuteWorkflow(VerifyAction, in)
	n := asleep(t, env)
	require.True(t, final.Reached)
	require.False(t, final.Verdict.Provisional)
	require.False(t, n.at.Before(in.SettlesAt), "awake until the waiter had its answer")
	require.Equal(t, PhaseWatching, n.next.Resume.Phase)
	require.Len(t, w.evals, 2)

	// Without the waiter, the same verification sleeps through the rest of
	// its settlement once old enough.
	w, env, in = newWorld(t, pass)
	in.SettlesAt = env.Now().Add(time.Hour)
	in.WatchUntil = in.SettlesAt.Add(watch)
	in.Dormancy = &testDormancy
	env.ExecuteWorkflow(VerifyAction, in)
	n = asleep(t, env)
	require.Equal(t, PhaseSettling, n.next.Resume.Phase)
	sameTime(t, in.SettlesAt, n.at.Add(n.backoff), "the next run starts at settlement")
	require.Len(t, w.evals, 1)
	env = runEnv(w, in.SettlesAt)
	env.ExecuteWorkflow(VerifyAction, n.next)
	n = asleep(t, env)
	require.Len(t, w.extracts, 2, "the settlement re-read pulled")
	require.False(t, w.evals[1].Provisional)
	sameTime(t, in.WatchUntil, n.at.Add(n.backoff), "")
}

// A recheck (an update, which Temporal delivers to a sleeping run) wakes
// it: the run pulls, evaluates, answers, then sleeps again.
func TestVerifyRecheckWakesASleepingRun(t *testing.T) {
	w, env, in := newWorld(t, pass)
	in.Dormancy = &testDormancy
	env.ExecuteWorkflow(VerifyAction, in)
	n := asleep(t, env)

	at := in.SettlesAt.Add(time.Hour)
	env = runEnv(w, at)
	var got RecheckResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateRecheck, "r1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("recheck rejected: %v", err) },
			OnAccept:   func() {},
			OnComplete: func(res any, err error) { require.NoError(t, err); got = res.(RecheckResult) },
		})
	}, 0)
	env.ExecuteWorkflow(VerifyAction, n.next)
	n2 := asleep(t, env)
	require.Len(t, w.extracts, 3, "the recheck pulled")
	require.Equal(t, 2, got.Verdict.Version)
	sameTime(t, at, n2.at, "")
	sameTime(t, in.WatchUntil, n2.at.Add(n2.backoff), "")
}

// Webhook events still to deliver keep the run awake (a sleeping run would
// hold them past their day of retries); the run sleeps once the last is
// delivered.
func TestVerifySleepsOnlyOnceWebhooksAreDelivered(t *testing.T) {
	w, env, in := newWorld(t, pass)
	in.SettlesAt = env.Now()
	in.Dormancy = &testDormancy
	w.webhooks = true
	failFor := 5 * time.Minute // the receiver is down past the age to sleep
	start := env.Now()
	var delivered []time.Time
	env.OnActivity(act.DeliverWebhooks, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeliverWebhooksInput) (activities.DeliverWebhooksResult, error) {
			if env.Now().Before(start.Add(failFor)) {
				return activities.DeliverWebhooksResult{}, errors.New("receiver down")
			}
			delivered = append(delivered, env.Now())
			return activities.DeliverWebhooksResult{Delivered: 1}, nil
		})
	env.ExecuteWorkflow(VerifyAction, in)
	n := asleep(t, env)
	require.NotEmpty(t, delivered)
	sameTime(t, delivered[len(delivered)-1], n.at, "asleep right after the last delivery")
	require.Nil(t, n.next.Resume.Webhooks.Queue)
}

// Without Dormancy nothing changes: the run keeps every wait on its timer,
// whatever its length.
func TestVerifyWithoutDormancyNeverSleeps(t *testing.T) {
	w, env, in := newWorld(t, pass)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalFactsArrived, FactsArrived{}) }, settlement+time.Hour)
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Len(t, w.evals, 4)
	require.Equal(t, 4, res.Passes)
}
