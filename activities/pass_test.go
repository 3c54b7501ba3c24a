package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
)

func (fx *fixture) pass(t *testing.T, in activities.PassInput) (activities.PassResult, error) {
	t.Helper()
	val, err := fx.env.ExecuteActivity(fx.acts.Pass, in)
	if err != nil {
		return activities.PassResult{}, err
	}
	var res activities.PassResult
	require.NoError(t, val.Get(&res))
	return res, nil
}

// TestPassPullsThenEvaluates: the production pass pulls the connectors
// first and evaluates on what that pull stored, in one activity; the
// stored verdict's pass latency counts the pull.
func TestPassPullsThenEvaluates(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})

	res, err := fx.pass(t, activities.PassInput{Pull: true,
		Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: id},
		Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
	require.NoError(t, err)
	require.True(t, res.Pulled)
	require.Empty(t, res.Unreachable)
	require.Equal(t, 1, fx.feed.pulls)
	require.Equal(t, commitlayer.StatusPass, res.Evaluate.Verdict.Status, "the evaluation saw the facts the same pass pulled: %+v", res.Evaluate.Verdict.Findings)
	require.True(t, res.Evaluate.Changed)
	stored, err := fx.db.LatestVerdict(context.Background(), fx.tenant, id)
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusPass, stored.Status)
	require.Positive(t, stored.PassLatency)
}

// TestPassWithoutPullOnlyEvaluates: a pass not asked to pull reads no
// connector, and evaluates on what is stored (here nothing yet).
func TestPassWithoutPullOnlyEvaluates(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})

	res, err := fx.pass(t, activities.PassInput{Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
	require.NoError(t, err)
	require.False(t, res.Pulled)
	require.Zero(t, fx.feed.pulls, "no pull")
	require.NotEqual(t, commitlayer.StatusPass, res.Evaluate.Verdict.Status, "the payout was never pulled")
}

// TestPassHandsUnreachableSourcesToTheEvaluation: a source the pull could
// not read is reported by the pass and counts as not connected in its
// verdict, which therefore cannot pass.
func TestPassHandsUnreachableSourcesToTheEvaluation(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.down = true
	res, err := fx.pass(t, activities.PassInput{Pull: true,
		Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: id},
		Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
	require.NoError(t, err)
	require.True(t, res.Pulled)
	require.Contains(t, res.Unreachable, "ledger")
	require.Equal(t, commitlayer.StatusUnknown, res.Evaluate.Verdict.Status, "%+v", res.Evaluate.Verdict)
}

// TestPassErrorsStayAsTheyAre: bad input to either step fails the pass for
// good (non-retryable, with the step's type); the evaluation of a pass
// whose pull failed never runs.
func TestPassErrorsStayAsTheyAre(t *testing.T) {
	fx := newFixture(t)
	id := fx.action(t, "bot", "account:acc_1", 500, fx.now.Add(-20*time.Minute))
	for name, in := range map[string]activities.PassInput{
		"pull without tenant": {Pull: true, Extract: activities.ExtractInput{}, Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}},
		"evaluate no action":  {Evaluate: activities.EvaluateInput{TenantID: fx.tenant}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fx.pass(t, in)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.True(t, appErr.NonRetryable(), "%v", err)
			require.Equal(t, activities.ErrInvalidInput, appErr.Type())
		})
	}
	_, err := fx.db.LatestVerdict(context.Background(), fx.tenant, id)
	require.ErrorIs(t, err, commitlayer.ErrNotFound, "no pass stored a verdict")
}

// actionReadStore signals each GetAction.
type actionReadStore struct {
	activities.Store
	read chan struct{}
}

func (s *actionReadStore) GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error) {
	s.read <- struct{}{}
	return s.Store.GetAction(ctx, tenantID, actionID)
}

// TestPassReadsItsActionBesideThePull: a pass that pulls reads its action
// while the connectors' feeds answer (the pull changes no action), once,
// and evaluates on what the pull stored; a pass for an action the store
// does not have still pulls and then fails, retryably, as Evaluate does.
func TestPassReadsItsActionBesideThePull(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})
	store := &actionReadStore{Store: fx.db, read: make(chan struct{}, 4)}
	fx.acts.Store = store
	arrived, release := fx.feed.holdRequests(t)

	type passed struct {
		res activities.PassResult
		err error
	}
	done := make(chan passed, 1)
	go func() {
		res, err := fx.acts.Pass(context.Background(), activities.PassInput{Pull: true,
			Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: id},
			Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
		done <- passed{res, err}
	}()
	awaitRequest(t, arrived)
	awaitRequest(t, store.read) // read while the feed holds its answer
	release <- struct{}{}
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, commitlayer.StatusPass, got.res.Evaluate.Verdict.Status)
	require.Equal(t, 1, got.res.Evaluate.Verdict.Version)
	require.Empty(t, store.read, "the action was read twice")

	release <- struct{}{}
	_, err := fx.acts.Pass(context.Background(), activities.PassInput{Pull: true,
		Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: "act_missing"},
		Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: "act_missing"}})
	require.ErrorContains(t, err, "not found")
	var appErr *temporal.ApplicationError
	require.False(t, errors.As(err, &appErr) && appErr.NonRetryable(), "a missing action is retried")
	require.Equal(t, 2, fx.feed.requests(), "the second pass pulled")
}
