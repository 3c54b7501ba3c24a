package activities_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	stripeconn "github.com/commitlayer/commitlayer/connectors/stripe"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/sandbox/stripefake"
)

// TestExtractPullsAStripeConnector: a stripe connector stored with its key
// sealed is pulled through the fake Stripe with the opened key; the cursor
// survives, so a second pull reads nothing twice; without the secrets key
// the source is reported unreachable, never pulled with a wrong key.
func TestExtractPullsAStripeConnector(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	box, err := secrets.FromEnv(func(string) string { return base64.StdEncoding.EncodeToString(raw) })
	require.NoError(t, err)

	const key = "rk_test_activitiesstripe0001"
	fake := stripefake.Start(stripefake.Options{Keys: []string{key}})
	t.Cleanup(fake.Close)
	fake.AddPayout(120000, "usd", "paid")
	fake.AddPayout(5000, "usd", "in_transit")

	const connID = "conn_stripe_test"
	sealed, hint, err := stripeconn.SealKey(box, fx.tenant, connID, key)
	require.NoError(t, err)
	require.Equal(t, "…0001", hint)
	require.NotContains(t, sealed, key)
	_, err = fx.db.CreateConnector(ctx, fx.tenant, commitlayer.Connector{ID: connID, Source: "payments", Kind: stripeconn.Kind,
		URL: fake.URL(), Secret: sealed, SecretHint: hint})
	require.NoError(t, err)

	fx.acts.Secrets = box
	val, err := fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.NoError(t, err)
	var res activities.ExtractResult
	require.NoError(t, val.Get(&res))
	require.NotContains(t, res.Unreachable, "payments")
	require.Equal(t, 2, res.Inserted, "two payouts")
	c, err := fx.db.GetConnector(ctx, fx.tenant, connID)
	require.NoError(t, err)
	require.NotEmpty(t, c.Cursor)

	val, err = fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.NoError(t, err)
	require.NoError(t, val.Get(&res))
	require.Zero(t, res.Inserted, "the cursor kept its place")

	fx.acts.Secrets = nil
	val, err = fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.NoError(t, err)
	require.NoError(t, val.Get(&res))
	require.Contains(t, res.Unreachable, "payments")
	require.NotContains(t, res.Unreachable["payments"], key)
}
