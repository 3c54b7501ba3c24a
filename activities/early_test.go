package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
)

// TestEarlyPassStoresTheFirstVerdictOfATenantWithoutConnectors: a tenant
// with connectors gets nothing early (its first pass pulls first); without
// any, the early pass stores the provisional verdict the verification's own
// first pass then finds: the same answer, nothing appended, and still news
// to the verification (EvaluateInput.Known), so its webhook events are
// queued. An action that has a verdict gets nothing more.
func TestEarlyPassStoresTheFirstVerdictOfATenantWithoutConnectors(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", fx.now.Add(-time.Minute), map[string]any{"payout_id": "p1", "amount": 500})
	fx.extract(t)

	id := fx.action(t, "agent-1", "account:acc_1", 500, fx.now.Add(-2*time.Minute))
	stored, err := fx.acts.EarlyPass(ctx, fx.tenant, id, "")
	require.NoError(t, err)
	require.False(t, stored, "a tenant with connectors")
	hist, err := fx.db.VerdictHistory(ctx, fx.tenant, id)
	require.NoError(t, err)
	require.Empty(t, hist)

	conns, err := fx.db.ListConnectors(ctx, fx.tenant)
	require.NoError(t, err)
	require.NoError(t, fx.db.DeleteConnector(ctx, fx.tenant, conns[0].ID))
	_, err = fx.db.CreateWebhook(ctx, fx.tenant, commitlayer.Webhook{ID: "wh_e", URL: "https://receiver.example/hook",
		Events: []string{"verdict.changed"}, Secret: "sealed"})
	require.NoError(t, err)

	stored, err = fx.acts.EarlyPass(ctx, fx.tenant, id, "")
	require.NoError(t, err)
	require.True(t, stored)
	hist, err = fx.db.VerdictHistory(ctx, fx.tenant, id)
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.True(t, hist[0].Provisional)
	require.Equal(t, commitlayer.StatusPass, hist[0].Status)

	// The verification's first pass: nothing appended, the verdict news.
	first := fx.evaluate(t, id, activities.EvaluateInput{Provisional: true})
	require.False(t, first.Changed)
	require.Equal(t, 1, first.Verdict.Version)
	require.True(t, first.Webhooks, "the early verdict is the verification's first: its events are queued")
	again := fx.evaluate(t, id, activities.EvaluateInput{Provisional: true, Known: 1})
	require.False(t, again.Webhooks, "nothing new to a verification that holds version 1")

	stored, err = fx.acts.EarlyPass(ctx, fx.tenant, id, "")
	require.NoError(t, err)
	require.False(t, stored, "an action with a verdict")

	// A store the action is not in: the pass refuses, nothing stored.
	other := fx.action(t, "agent-1", "account:acc_1", 500, fx.now.Add(-time.Minute))
	_, err = fx.acts.EarlyPass(ctx, fx.tenant, other, "db_elsewhere")
	require.Error(t, err)
	hist, err = fx.db.VerdictHistory(ctx, fx.tenant, other)
	require.NoError(t, err)
	require.Empty(t, hist)
}
