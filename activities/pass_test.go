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
// time the pass took is kept with the verdict.
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
	var passUS *int64
	require.NoError(t, fx.db.Pool().QueryRow(context.Background(), `SELECT pass_us FROM verdicts WHERE tenant_id = $1 AND action_id = $2`,
		fx.tenant, id).Scan(&passUS))
	require.NotNil(t, passUS, "the pass's time is kept with its verdict")
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

// TestFirstVerdict: for a tenant without connectors, the first pass run
// beside a verification's start stores the verdict the workflow's own
// first pass would (provisional), only as the action's first; for a
// tenant with connectors (whose first pass pulls first) it stores nothing.
func TestFirstVerdict(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	id := fx.action(t, "bot", "account:acc_1", 500, fx.now.Add(-20*time.Minute))
	require.NoError(t, activities.FirstVerdict(ctx, fx.acts, fx.tenant, id))
	_, err := fx.db.LatestVerdict(ctx, fx.tenant, id)
	require.ErrorIs(t, err, commitlayer.ErrNotFound, "a tenant with connectors: nothing before the pull")

	conns, err := fx.db.ListConnectors(ctx, fx.tenant)
	require.NoError(t, err)
	require.NoError(t, fx.db.DeleteConnector(ctx, fx.tenant, conns[0].ID))
	require.NoError(t, activities.FirstVerdict(ctx, fx.acts, fx.tenant, id))
	first, err := fx.db.LatestVerdict(ctx, fx.tenant, id)
	require.NoError(t, err)
	require.Equal(t, 1, first.Version)
	require.True(t, first.Provisional)
	res, err := fx.pass(t, activities.PassInput{Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id, Provisional: true}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Evaluate.Verdict.Version, "the workflow's pass says the same: no new version")
	require.True(t, first.SameAnswer(res.Evaluate.Verdict))

	// Once the action has a verdict, a first verdict adds nothing.
	final, err := fx.pass(t, activities.PassInput{Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id, Known: 1}})
	require.NoError(t, err)
	require.NoError(t, activities.FirstVerdict(ctx, fx.acts, fx.tenant, id))
	latest, err := fx.db.LatestVerdict(ctx, fx.tenant, id)
	require.NoError(t, err)
	require.Equal(t, final.Evaluate.Verdict.Version, latest.Version)
}
