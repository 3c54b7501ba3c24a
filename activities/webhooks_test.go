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
	var headers []http.Header
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got, headers = append(got, body), append(headers, r.Header.Clone())
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

	const secret = "whsec_YWN0aXZpdGllcy10ZXN0LXNlY3JldC0wMDAx" // base64 of "activities-test-secret-0001"
	sealed, err := box.Seal([]byte(secret), commitlayer.WebhookSecretAD(fx.tenant, "wh_1"))
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
		require.Equal(t, "evt_a1", headers[i].Get(webhook.HeaderID), "the message id is the event's, on every retry")
		require.Empty(t, headers[i].Get("CommitLayer-Signature"), "the home-made header is gone")
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

	sealed, err := box.Seal([]byte("whsec_activities_test_0002"), commitlayer.WebhookSecretAD(fx.tenant, "wh_other"))
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

// After a rotation, deliveries carry two signatures (the new secret's and
// the previous one's) until the overlap ends, then only the new one's.
func TestDeliverWebhooksRotation(t *testing.T) {
	fx := newFixture(t)
	ctx := t.Context()
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	fx.acts.Secrets = box

	var mu sync.Mutex
	var headers []http.Header
	var bodies [][]byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		headers, bodies = append(headers, r.Header.Clone()), append(bodies, body)
	}))
	defer recv.Close()

	const oldSecret = "whsec_b2xkLXNlY3JldC1vZi10aGUtd2ViaG9vaw=="
	const newSecret = "whsec_bmV3LXNlY3JldC1vZi10aGUtd2ViaG9vaw=="
	seal := func(s string) string {
		sealed, err := box.Seal([]byte(s), commitlayer.WebhookSecretAD(fx.tenant, "wh_r"))
		require.NoError(t, err)
		return sealed
	}
	_, err = fx.db.CreateWebhook(ctx, fx.tenant, commitlayer.Webhook{ID: "wh_r", URL: recv.URL,
		Events: []string{webhook.EventVerdictChanged}, Secret: seal(oldSecret)})
	require.NoError(t, err)
	now := time.Now()
	rotated, err := fx.db.RotateWebhook(ctx, fx.tenant, "wh_r", seal(newSecret), now, now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour).Truncate(time.Microsecond).UTC(), rotated.PreviousUntil)

	id := fx.action(t, "agent-1", "account:acc_r", 100, fx.now)
	deliver := func(evt string) {
		t.Helper()
		ev := webhook.Event{ID: evt, Type: webhook.EventVerdictChanged, ActionID: id, Sequence: 1,
			Verdict: commitlayer.Verdict{ActionID: id, Status: commitlayer.StatusFail, Version: 1}}
		_, err := fx.env.ExecuteActivity(fx.acts.DeliverWebhooks, activities.DeliverWebhooksInput{TenantID: fx.tenant, Event: ev})
		require.NoError(t, err)
	}
	deliver("evt_r1")
	// The overlap ends (a rotation that states an end already past).
	_, err = fx.db.RotateWebhook(ctx, fx.tenant, "wh_r", seal(newSecret), now, now.Add(-time.Second))
	require.NoError(t, err)
	deliver("evt_r2")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, headers, 2)
	require.Regexp(t, `^v1,\S+ v1,\S+$`, headers[0].Get(webhook.HeaderSignature), "two signatures during the overlap")
	_, err = webhook.Verify(newSecret, headers[0], bodies[0], 0)
	require.NoError(t, err)
	_, err = webhook.Verify(oldSecret, headers[0], bodies[0], 0)
	require.NoError(t, err, "the previous secret still verifies during the overlap")

	require.Regexp(t, `^v1,\S+$`, headers[1].Get(webhook.HeaderSignature), "one signature after it")
	_, err = webhook.Verify(newSecret, headers[1], bodies[1], 0)
	require.NoError(t, err)
	_, err = webhook.Verify(oldSecret, headers[1], bodies[1], 0)
	require.ErrorIs(t, err, webhook.ErrMismatch, "the previous secret stopped signing")
}
