package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestWebhookDeliveries(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	mk := func(id string, events ...string) {
		_, err := db.CreateWebhook(ctx, tn.ID, commitlayer.Webhook{ID: id, URL: "https://hooks.example.com/" + id, Events: events, Secret: "sealed-" + id})
		require.NoError(t, err)
	}
	mk("wh_a", "verdict.final", "verdict.changed")
	mk("wh_b", "verdict.changed")
	_, err := db.CreateWebhook(ctx, tn.ID, commitlayer.Webhook{ID: "wh_a", URL: "https://x", Events: []string{"verdict.final"}, Secret: "s"})
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	_, err = db.CreateWebhook(ctx, tn.ID, commitlayer.Webhook{ID: "wh_c", URL: "https://x"})
	require.ErrorIs(t, err, commitlayer.ErrInvalid)

	// verdict.final goes to wh_a only; planning twice plans once.
	d := commitlayer.WebhookDelivery{EventID: "evt_1", EventType: "verdict.final", ActionID: "a1", Sequence: 2}
	ts, err := db.PlanDeliveries(ctx, tn.ID, d)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, "wh_a", ts[0].WebhookID)
	require.Equal(t, "sealed-wh_a", ts[0].Secret)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, db.RecordDeliveryAttempt(ctx, tn.ID, "wh_a", "evt_1", commitlayer.DeliveryFailing, 503, "http 503", at))
	ts, err = db.PlanDeliveries(ctx, tn.ID, d)
	require.NoError(t, err)
	require.Len(t, ts, 1, "still to deliver")
	require.NoError(t, db.RecordDeliveryAttempt(ctx, tn.ID, "wh_a", "evt_1", commitlayer.DeliveryDelivered, 204, "", at.Add(time.Second)))
	ts, err = db.PlanDeliveries(ctx, tn.ID, d)
	require.NoError(t, err)
	require.Empty(t, ts, "delivered: not sent again")

	// verdict.changed goes to both, oldest webhook first.
	ts, err = db.PlanDeliveries(ctx, tn.ID, commitlayer.WebhookDelivery{EventID: "evt_2", EventType: "verdict.changed", ActionID: "a1", Sequence: 2})
	require.NoError(t, err)
	require.Len(t, ts, 2)

	ds, err := db.ListDeliveries(ctx, tn.ID, "wh_a", 10)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	var first commitlayer.WebhookDelivery
	for _, x := range ds {
		if x.EventID == "evt_1" {
			first = x
		}
	}
	require.Equal(t, commitlayer.DeliveryDelivered, first.Status)
	require.Equal(t, 2, first.Attempts)
	require.Equal(t, 204, first.LastStatus)
	require.Empty(t, first.LastError)
	require.Equal(t, at.Add(time.Second), first.DeliveredAt)

	// Another tenant sees nothing; deleting a webhook takes its deliveries.
	other := newTenant(t)
	ws, err := db.ListWebhooks(ctx, other.ID)
	require.NoError(t, err)
	require.Empty(t, ws)
	require.ErrorIs(t, db.DeleteWebhook(ctx, other.ID, "wh_a"), commitlayer.ErrNotFound)
	require.NoError(t, db.DeleteWebhook(ctx, tn.ID, "wh_a"))
	ds, err = db.ListDeliveries(ctx, tn.ID, "wh_a", 10)
	require.NoError(t, err)
	require.Empty(t, ds)
	_, err = db.GetWebhook(ctx, tn.ID, "wh_a")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

// A disabled webhook (its receiver answered 410 Gone) gets no new
// deliveries, its pending ones are given up, and enabling it starts the
// next events again.
func TestWebhookDisabled(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, err := db.CreateWebhook(ctx, tn.ID, commitlayer.Webhook{ID: "wh_g", URL: "https://hooks.example.com/g",
		Events: []string{"verdict.changed"}, Secret: "sealed"})
	require.NoError(t, err)
	plan := func(evt string) []commitlayer.WebhookTarget {
		ts, err := db.PlanDeliveries(ctx, tn.ID, commitlayer.WebhookDelivery{EventID: evt, EventType: "verdict.changed", ActionID: "a1", Sequence: 1})
		require.NoError(t, err)
		return ts
	}
	require.Len(t, plan("evt_1"), 1)
	require.Len(t, plan("evt_2"), 1)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.ErrorIs(t, db.RecordDeliveryAttempt(ctx, tn.ID, "wh_g", "evt_1", "lost", 0, "", at), commitlayer.ErrInvalid)
	require.NoError(t, db.RecordDeliveryAttempt(ctx, tn.ID, "wh_g", "evt_1", commitlayer.DeliveryFailed, 410, "http 410", at))
	require.NoError(t, db.DisableWebhook(ctx, tn.ID, "wh_g", "http 410", at))
	require.NoError(t, db.DisableWebhook(ctx, tn.ID, "wh_g", "later", at.Add(time.Hour)), "disabling again keeps the first reason")
	require.ErrorIs(t, db.DisableWebhook(ctx, tn.ID, "wh_none", "x", at), commitlayer.ErrNotFound)

	w, err := db.GetWebhook(ctx, tn.ID, "wh_g")
	require.NoError(t, err)
	require.Equal(t, at, w.DisabledAt)
	require.Equal(t, "http 410", w.DisabledReason)
	var has bool
	require.NoError(t, db.Pool().QueryRow(ctx, hasWebhooksSQL, tn.ID).Scan(&has))
	require.False(t, has, "no enabled webhook")
	require.Empty(t, plan("evt_1"))
	require.Empty(t, plan("evt_3"), "nothing planned for a disabled webhook")

	ds, err := db.ListDeliveries(ctx, tn.ID, "wh_g", 10)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	for _, d := range ds {
		require.Equal(t, commitlayer.DeliveryFailed, d.Status, d.EventID)
		if d.EventID == "evt_1" {
			require.Equal(t, "http 410", d.LastError)
			require.Equal(t, 410, d.LastStatus)
		} else {
			require.Equal(t, "webhook disabled", d.LastError)
		}
	}

	w, err = db.EnableWebhook(ctx, tn.ID, "wh_g")
	require.NoError(t, err)
	require.True(t, w.DisabledAt.IsZero())
	require.Empty(t, w.DisabledReason)
	require.Empty(t, plan("evt_2"), "given up stays given up")
	require.Len(t, plan("evt_4"), 1, "the next events go again")
	_, err = db.EnableWebhook(ctx, tn.ID, "wh_none")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

// When an event's delivery window is over, its deliveries still failing
// are given up and say why; delivered ones are left alone.
func TestGiveUpDeliveries(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	for _, id := range []string{"wh_x", "wh_y", "wh_z"} {
		_, err := db.CreateWebhook(ctx, tn.ID, commitlayer.Webhook{ID: id, URL: "https://hooks.example.com/" + id,
			Events: []string{"verdict.final"}, Secret: "sealed"})
		require.NoError(t, err)
	}
	_, err := db.PlanDeliveries(ctx, tn.ID, commitlayer.WebhookDelivery{EventID: "evt_w", EventType: "verdict.final", ActionID: "a1", Sequence: 2})
	require.NoError(t, err)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, db.RecordDeliveryAttempt(ctx, tn.ID, "wh_x", "evt_w", commitlayer.DeliveryFailing, 503, "http 503", at))
	require.NoError(t, db.RecordDeliveryAttempt(ctx, tn.ID, "wh_y", "evt_w", commitlayer.DeliveryDelivered, 200, "", at))
	require.NoError(t, db.GiveUpDeliveries(ctx, tn.ID, "evt_w", "given up after 24h0m0s", at.Add(time.Hour)))
	want := map[string][2]string{
		"wh_x": {commitlayer.DeliveryFailed, "http 503; given up after 24h0m0s"},
		"wh_y": {commitlayer.DeliveryDelivered, ""},
		"wh_z": {commitlayer.DeliveryFailed, "given up after 24h0m0s"},
	}
	for id, w := range want {
		ds, err := db.ListDeliveries(ctx, tn.ID, id, 10)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, w[0], ds[0].Status, id)
		require.Equal(t, w[1], ds[0].LastError, id)
	}
}
