package activities_test

import (
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// DeliverWebhooks signs each event with the webhook's opened secret, does
// not follow a redirect (a failed attempt, retried), records every attempt,
// and does not send a delivered event again. Evaluate says whether the
// tenant has webhooks.
func TestDeliverWebhooks(t *testing.T) {
	fx := newFixture(t)
	ctx := t.Context()
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	fx.acts.Secrets = box

	var mu sync.Mutex
	redirect := true
	var got [][]byte
	var headers []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got, headers = append(got, body), append(headers, r.Header.Get(webhook.Header))
		if redirect {
			http.Redirect(w, r, "http://169.254.169.254/latest", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer recv.Close()

	id := fx.action(t, "agent-1", "account:acc_1", 100, fx.now)
	res := fx.evaluate(t, id, activities.EvaluateInput{})
	require.False(t, res.Webhooks, "no webhooks yet")

	const secret = "whsec_activities_test_0001"
	sealed, err := box.Seal([]byte(secret), activities.WebhookSecretAD(fx.tenant, "wh_1"))
	require.NoError(t, err)
	_, err = fx.db.CreateWebhook(ctx, fx.tenant, commitlayer.Webhook{ID: "wh_1", URL: recv.URL + "/hook",
		Events: []string{webhook.EventVerdictFinal}, Secret: sealed})
	require.NoError(t, err)

	ev := webhook.Event{ID: "evt_a1", Type: webhook.EventVerdictFinal, ActionID: id, Sequence: 2,
		Verdict: commitlayer.Verdict{ActionID: id, Status: commitlayer.StatusPass, Version: 2}}
	in := activities.DeliverWebhooksInput{TenantID: fx.tenant, Event: ev}
	_, err = fx.env.ExecuteActivity(fx.acts.DeliverWebhooks, in)
	require.Error(t, err, "a redirect is a failed attempt")
	ds, err := fx.db.ListDeliveries(ctx, fx.tenant, "wh_1", 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, commitlayer.DeliveryFailing, ds[0].Status)
	require.Equal(t, "http 302", ds[0].LastError)

	mu.Lock()
	redirect = false
	mu.Unlock()
	val, err := fx.env.ExecuteActivity(fx.acts.DeliverWebhooks, in)
	require.NoError(t, err)
	var out activities.DeliverWebhooksResult
	require.NoError(t, val.Get(&out))
	require.Equal(t, 1, out.Delivered)
	val, err = fx.env.ExecuteActivity(fx.acts.DeliverWebhooks, in)
	require.NoError(t, err)
	require.NoError(t, val.Get(&out))
	require.Zero(t, out.Delivered, "delivered once: not sent again")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2, "the redirect was not followed")
	for i := range got {
		e, err := webhook.Verify(secret, headers[i], got[i], time.Minute)
		require.NoError(t, err)
		require.Equal(t, "evt_a1", e.ID)
	}
	require.NotContains(t, fx.logs.String(), secret)
	ds, err = fx.db.ListDeliveries(ctx, fx.tenant, "wh_1", 10)
	require.NoError(t, err)
	require.Equal(t, commitlayer.DeliveryDelivered, ds[0].Status)
	require.Equal(t, 2, ds[0].Attempts)

	// A changed verdict now says the tenant has webhooks.
	id2 := fx.action(t, "agent-1", "account:acc_2", 100, fx.now)
	res = fx.evaluate(t, id2, activities.EvaluateInput{})
	require.True(t, res.Changed)
	require.True(t, res.Webhooks)
}

// A webhook whose sealed secret does not open (sealed for another webhook,
// or under another key) is a failed attempt that says so, not a network
// failure; nothing is sent unsigned.
func TestDeliverWebhooksSecretDoesNotOpen(t *testing.T) {
	fx := newFixture(t)
	ctx := t.Context()
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	fx.acts.Secrets = box

	var mu sync.Mutex
	sent := 0
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent++
		mu.Unlock()
	}))
	defer recv.Close()

	sealed, err := box.Seal([]byte("whsec_activities_test_0002"), activities.WebhookSecretAD(fx.tenant, "wh_other"))
	require.NoError(t, err)
	_, err = fx.db.CreateWebhook(ctx, fx.tenant, commitlayer.Webhook{ID: "wh_2", URL: recv.URL,
		Events: []string{webhook.EventVerdictChanged}, Secret: sealed})
	require.NoError(t, err)
	id := fx.action(t, "agent-1", "account:acc_1", 100, fx.now)
	_, err = fx.env.ExecuteActivity(fx.acts.DeliverWebhooks, activities.DeliverWebhooksInput{TenantID: fx.tenant,
		Event: webhook.Event{ID: "evt_b1", Type: webhook.EventVerdictChanged, ActionID: id, Sequence: 1}})
	require.Error(t, err)
	ds, err := fx.db.ListDeliveries(ctx, fx.tenant, "wh_2", 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, commitlayer.DeliveryFailing, ds[0].Status)
	require.Equal(t, "secret does not open with the worker's key", ds[0].LastError)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, sent)
}
