package workflows

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
)

// world is a scripted stand-in for the activities: it decides each pass's
// verdict from what the pass can see (the phase, the clock, what the last
// pull reached), and versions verdicts as the store does.
type world struct {
	mu        sync.Mutex
	env       *testsuite.TestWorkflowEnvironment
	extracts  []time.Time
	evals     []activities.EvaluateInput
	evalTimes []time.Time
	latest    commitlayer.Verdict
	// unreachable is what the next pull reports.
	unreachable map[string]string
	// status decides the verdict of an evaluation.
	status   func(w *world, in activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding)
	endWatch int
	// webhooks says the tenant has verdict webhooks (EvaluateResult.Webhooks).
	webhooks bool
	// freshAsOf is each pull's ExtractInput.FreshAsOf; pullLate moves the
	// start each pull reports (ExtractResult.StartedAt) after the clock.
	freshAsOf []time.Time
	pullLate  time.Duration
}

func (w *world) extract(_ context.Context, in activities.ExtractInput) (activities.ExtractResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.extracts = append(w.extracts, w.env.Now())
	w.freshAsOf = append(w.freshAsOf, in.FreshAsOf)
	return activities.ExtractResult{Unreachable: w.unreachable, StartedAt: w.env.Now().Add(w.pullLate)}, nil
}

func (w *world) evaluate(_ context.Context, in activities.EvaluateInput) (activities.EvaluateResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evals = append(w.evals, in)
	w.evalTimes = append(w.evalTimes, w.env.Now())
	st, findings := w.status(w, in)
	v := commitlayer.Verdict{
		ActionID: in.ActionID, Contract: "payout", Status: st, Provisional: in.Provisional,
		Lenses: commitlayer.Lenses{Outcome: st, Policy: commitlayer.StatusPass}, Findings: findings,
		EvaluatedAt: w.env.Now(),
	}
	if v.SameAnswer(w.latest) && w.latest.Version > 0 {
		return activities.EvaluateResult{Verdict: w.latest}, nil
	}
	v.Version = w.latest.Version + 1
	w.latest = v
	return activities.EvaluateResult{Verdict: v, Changed: true, Webhooks: w.webhooks}, nil
}

func (w *world) endWatchAct(context.Context, activities.EndWatchInput) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endWatch++
	return nil
}

const (
	settlement = 10 * time.Minute
	watch      = 72 * time.Hour
)

func newWorld(t *testing.T, status func(w *world, in activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding)) (*world, *testsuite.TestWorkflowEnvironment, VerifyActionInput) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	w := &world{env: env, status: status}
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(act.Extract, mock.Anything, mock.Anything).Return(w.extract)
	env.OnActivity(act.Evaluate, mock.Anything, mock.Anything).Return(w.evaluate)
	env.OnActivity(act.Pass, mock.Anything, mock.Anything).Return(w.pass)
	env.OnActivity(act.EndWatch, mock.Anything, mock.Anything).Return(w.endWatchAct)
	in := VerifyActionInput{
		TenantID: "t_1", ActionID: "act_1",
		SettlesAt: start.Add(settlement), WatchUntil: start.Add(settlement + watch),
	}
	return w, env, in
}

func pass(*world, activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
	return commitlayer.StatusPass, nil
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) VerifyActionResult {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res VerifyActionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

func TestVerifyProvisionalThenFinalThenWatchExpiry(t *testing.T) {
	w, env, in := newWorld(t, pass)
	var queried commitlayer.Verdict
	env.RegisterDelayedCallback(func() {
		val, err := env.QueryWorkflow(QueryVerdict)
		require.NoError(t, err)
		require.NoError(t, val.Get(&queried))
	}, time.Minute)

	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)

	// Two pulls: at start and when the window closed.
	require.Len(t, w.extracts, 2)
	require.True(t, in.SettlesAt.Add(-settlement).Equal(w.extracts[0]), "first pull at %s", w.extracts[0])
	require.False(t, w.extracts[1].Before(in.SettlesAt), "settlement re-read happened before the window closed")
	require.Len(t, w.evals, 3, "provisional, final at settlement, and the pass over everything stored before completing")
	require.True(t, w.evals[0].Provisional)
	require.False(t, w.evals[1].Provisional)
	// The query during the window answered the provisional verdict.
	require.True(t, queried.Provisional)
	require.Equal(t, commitlayer.StatusPass, queried.Status)
	// The final verdict is a new version (provisional → final), and the
	// workflow ended when the watch did.
	require.Equal(t, 2, res.Verdict.Version)
	require.False(t, res.Verdict.Provisional)
	require.False(t, env.Now().Before(in.WatchUntil))
}

func TestVerifyStaleReadCorrectedAtSettlement(t *testing.T) {
	// The first pull saw a stale snapshot without the refund: FAIL. The
	// settlement re-read sees it: PASS.
	w, env, in := newWorld(t, func(w *world, in activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
		if len(w.extracts) < 2 {
			return commitlayer.StatusFail, []commitlayer.Finding{{Code: commitlayer.CodeMissingEffect, Check: "refund", Lens: commitlayer.LensOutcome}}
		}
		return commitlayer.StatusPass, nil
	})
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Len(t, w.evals, 3)
	require.Equal(t, commitlayer.StatusPass, res.Verdict.Status)
	require.False(t, res.Verdict.Provisional)
	require.Equal(t, 2, res.Verdict.Version)
}

func TestVerifyUnreachableSourceReadAgainAtSettlement(t *testing.T) {
	w, env, in := newWorld(t, func(w *world, in activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
		if len(in.Unreachable) > 0 {
			return commitlayer.StatusUnknown, []commitlayer.Finding{{Code: commitlayer.CodeSourceUnavailable, Check: "refund", Lens: commitlayer.LensOutcome}}
		}
		return commitlayer.StatusPass, nil
	})
	w.unreachable = map[string]string{"payments": "connection refused"}
	// The system comes back before the window closes.
	env.RegisterDelayedCallback(func() { w.mu.Lock(); w.unreachable = nil; w.mu.Unlock() }, 5*time.Minute)

	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Len(t, w.evals, 3)
	require.Equal(t, map[string]string{"payments": "connection refused"}, w.evals[0].Unreachable)
	require.Empty(t, w.evals[1].Unreachable)
	require.Equal(t, commitlayer.StatusPass, res.Verdict.Status)
}

func TestVerifyStillUnreachableAtSettlementStaysUnknown(t *testing.T) {
	w, env, in := newWorld(t, func(w *world, in activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
		if len(in.Unreachable) > 0 {
			return commitlayer.StatusUnknown, nil
		}
		return commitlayer.StatusPass, nil
	})
	w.unreachable = map[string]string{"payments": "connection refused"}
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Equal(t, commitlayer.StatusUnknown, res.Verdict.Status)
	require.False(t, res.Verdict.Provisional)
}

func TestVerifyReversalAfterSettlementFlipsVerdict(t *testing.T) {
	reversed := false
	w, env, in := newWorld(t, func(w *world, in activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
		if reversed {
			return commitlayer.StatusFail, []commitlayer.Finding{{Code: commitlayer.CodeEffectReversed, Check: "payout", Lens: commitlayer.LensOutcome}}
		}
		return commitlayer.StatusPass, nil
	})
	// A day after settlement, the payout is returned and ingestion signals.
	env.RegisterDelayedCallback(func() {
		reversed = true
		env.SignalWorkflow(SignalFactsArrived, FactsArrived{Subjects: []commitlayer.Subject{"account:acc_1"}})
	}, settlement+24*time.Hour)

	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Len(t, w.evals, 4)
	require.Equal(t, commitlayer.StatusFail, res.Verdict.Status)
	require.Equal(t, commitlayer.CodeEffectReversed, res.Verdict.Findings[0].Code)
	require.Equal(t, 3, res.Verdict.Version)
	require.False(t, w.evals[2].Provisional)
	// A signal re-evaluates stored facts; it does not pull.
	require.Len(t, w.extracts, 2)
}

func TestVerifySignalBurstCostsOnePass(t *testing.T) {
	w, env, in := newWorld(t, pass)
	env.RegisterDelayedCallback(func() {
		for range 5 {
			env.SignalWorkflow(SignalFactsArrived, FactsArrived{})
		}
	}, time.Hour)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	// Two passes for the window, then at most two for the burst: the first
	// signal wakes the watch, the rest are drained together after its pass.
	require.GreaterOrEqual(t, len(w.evals), 4)
	require.LessOrEqual(t, len(w.evals), 5)
}

func TestVerifyRecheckUpdate(t *testing.T) {
	n := 0
	w, env, in := newWorld(t, func(w *world, in activities.EvaluateInput) (commitlayer.Status, []commitlayer.Finding) {
		n++
		if n == 1 {
			return commitlayer.StatusFail, nil
		}
		return commitlayer.StatusPass, nil
	})
	var got RecheckResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateRecheck, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("recheck rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(res any, err error) {
				require.NoError(t, err)
				got = res.(RecheckResult)
			},
		})
	}, 2*time.Minute)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	// The recheck pulled again and produced a new (still provisional) verdict.
	require.Len(t, w.extracts, 3)
	require.Equal(t, commitlayer.StatusPass, got.Verdict.Status)
	require.True(t, got.Verdict.Provisional)
	require.Equal(t, 2, got.Verdict.Version)
}

func TestVerifyContinuesAsNewOnLongWatch(t *testing.T) {
	_, env, in := newWorld(t, pass)
	for i := range maxPassesPerRun + 5 {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(SignalFactsArrived, FactsArrived{})
		}, settlement+time.Duration(i+1)*time.Minute)
	}
	env.ExecuteWorkflow(VerifyAction, in)
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Equal(t, "VerifyAction", can.WorkflowType.Name)
}

func TestVerifyResumesAfterContinueAsNew(t *testing.T) {
	w, env, in := newWorld(t, pass)
	in.Resume = &VerifyState{
		Phase:   PhaseWatching,
		Verdict: commitlayer.Verdict{ActionID: "act_1", Status: commitlayer.StatusPass, Version: 2},
		Passes:  7,
	}
	w.latest = in.Resume.Verdict
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalFactsArrived, FactsArrived{}) }, time.Hour)
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Empty(t, w.extracts, "a resumed watch does not pull again")
	require.Len(t, w.evals, 2)
	require.Equal(t, 9, res.Passes)
}

func TestVerifyCancelledEndsWatch(t *testing.T) {
	w, env, in := newWorld(t, pass)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, settlement+time.Hour)
	env.ExecuteWorkflow(VerifyAction, in)
	require.True(t, env.IsWorkflowCompleted())
	require.Error(t, env.GetWorkflowError())
	require.Equal(t, 1, w.endWatch)
}

func TestVerifyRejectsBadInput(t *testing.T) {
	for name, in := range map[string]VerifyActionInput{
		"no tenant":       {ActionID: "a", SettlesAt: time.Now(), WatchUntil: time.Now()},
		"no action":       {TenantID: "t", SettlesAt: time.Now(), WatchUntil: time.Now()},
		"no settlement":   {TenantID: "t", ActionID: "a"},
		"watch before it": {TenantID: "t", ActionID: "a", SettlesAt: time.Now(), WatchUntil: time.Now().Add(-time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			_, env, _ := newWorld(t, pass)
			env.ExecuteWorkflow(VerifyAction, in)
			require.True(t, env.IsWorkflowCompleted())
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(env.GetWorkflowError(), &appErr), "want an application error, got %v", env.GetWorkflowError())
			require.True(t, appErr.NonRetryable())
			require.Equal(t, activities.ErrInvalidInput, appErr.Type())
		})
	}
}

func TestVerifyEndWatchSignalCompletesOnceFinal(t *testing.T) {
	w, env, in := newWorld(t, pass)
	// Sent during the settlement window: the final verdict still comes,
	// then the verification completes instead of watching 72 hours.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalEndWatch, EndWatch{Reason: "scenario done"}) }, time.Minute)
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.False(t, res.Verdict.Provisional)
	require.Len(t, w.evals, 3)
	require.Equal(t, 1, w.endWatch)
	require.True(t, env.Now().Before(in.SettlesAt.Add(time.Minute)), "it watched on after the end-watch signal")
}

func TestVerifyEndWatchSignalDuringWatch(t *testing.T) {
	w, env, in := newWorld(t, pass)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalEndWatch, EndWatch{}) }, settlement+time.Hour)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	require.Equal(t, 1, w.endWatch)
	require.True(t, env.Now().Before(in.SettlesAt.Add(2*time.Hour)))
}

// TestVerifyRecheckRefusedOnceTheWatchEnded: the recheck update's
// validator refuses a re-check once the watch has ended (here by signal,
// during the settlement window); before that it is accepted.
func TestVerifyRecheckRefusedOnceTheWatchEnded(t *testing.T) {
	w, env, in := newWorld(t, pass)
	var accepted, rejected error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateRecheck, "before", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { accepted = err }, OnComplete: func(any, error) {},
		})
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalEndWatch, EndWatch{Reason: "done"}) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateRecheck, "after", &testsuite.TestUpdateCallback{
			OnAccept: func() { rejected = errors.New("accepted") }, OnReject: func(err error) { rejected = err },
			OnComplete: func(any, error) {},
		})
	}, 2*time.Minute)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	require.NoError(t, accepted, "a re-check during the watch is accepted")
	require.ErrorContains(t, rejected, "watch has ended")
	require.Equal(t, 1, w.endWatch)
}

// TestSettlementReReadIsNeverAnsweredByTheFirstRead: when the first pass's
// pull started after the window closed (a short window, a slow worker),
// the settlement pass still asks for facts fresher than that pull, so the
// worker's pull coalescer cannot answer the re-read with the first read.
func TestSettlementReReadIsNeverAnsweredByTheFirstRead(t *testing.T) {
	w, env, in := newWorld(t, pass)
	w.pullLate = settlement + time.Minute // the first pull "started" after the window closed
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	require.GreaterOrEqual(t, len(w.freshAsOf), 2)
	first := w.extracts[0].Add(w.pullLate)
	for i, f := range w.freshAsOf[1:] {
		require.True(t, f.After(first), "pull %d asked for facts as of %s, not after the first pull's start %s", i+2, f, first)
	}
	require.False(t, w.freshAsOf[0].IsZero(), "a compact pass asks for fresh facts")
}
