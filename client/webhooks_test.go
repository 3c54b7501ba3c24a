package client_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/internal/teststore"
)

func TestClientWebhooksAgainstTheAPI(t *testing.T) {
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	db := teststore.DB(t)
	hs := httptest.NewServer(api.New(api.Config{Store: db, AdminKey: adminKey, Secrets: box,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}).Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := client.New(hs.URL, adminKey)
	require.NoError(t, err)
	tn, err := admin.CreateTenant(ctx, "webhooks-client")
	require.NoError(t, err)
	c, err := client.New(hs.URL, tn.APIKey)
	require.NoError(t, err)

	w, err := c.CreateWebhook(ctx, client.WebhookInput{URL: "https://hooks.example.com/cl",
		Events: []string{webhook.EventVerdictFinal}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(w.Secret, "whsec_"))
	list, err := c.ListWebhooks(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, w.ID, list[0].ID)
	ds, err := c.ListWebhookDeliveries(ctx, w.ID)
	require.NoError(t, err)
	require.Empty(t, ds)

	_, err = c.CreateWebhook(ctx, client.WebhookInput{URL: "https://hooks.example.com/cl", Events: []string{"verdict.deleted"}})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "invalid_request", ae.Code)

	// Rotation: a new secret once, the old one signing for the overlap.
	r, err := c.RotateWebhook(ctx, w.ID, 2*time.Hour)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(r.Secret, "whsec_"))
	require.NotEqual(t, w.Secret, r.Secret)
	require.NotNil(t, r.PreviousSecretUntil)
	require.NotNil(t, r.RotatedAt)
	require.Equal(t, 2*time.Hour, r.PreviousSecretUntil.Sub(*r.RotatedAt))
	r, err = c.RotateWebhook(ctx, w.ID, -1)
	require.NoError(t, err, "the server's default overlap")
	require.Equal(t, 24*time.Hour, r.PreviousSecretUntil.Sub(*r.RotatedAt))
	_, err = c.RotateWebhook(ctx, "wh_nope", 0)
	require.True(t, client.IsNotFound(err))

	require.NoError(t, c.DeleteWebhook(ctx, w.ID))
	require.True(t, client.IsNotFound(c.DeleteWebhook(ctx, w.ID)))
	_, err = c.ListWebhookDeliveries(ctx, w.ID)
	require.True(t, client.IsNotFound(err))
}
