package api

import (
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

func TestWebhookRoutes(t *testing.T) {
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	guard := netguard.New(netguard.Options{}) // private addresses refused
	e := newEnv(t, func(c *Config) { c.Secrets, c.Guard = box, guard })
	tid, key := e.tenant("hooks")

	// Bad input names the field.
	for body, want := range map[string]string{
		`{"events":["verdict.final"]}`:                               "url: is required",
		`{"url":"https://hooks.example.com/x"}`:                      "events: give one or more of",
		`{"url":"https://hooks.example.com/x","events":["deleted"]}`: `events[0]: "deleted" is not an event`,
		`{"url":"https://hooks.example.com/x","events":"x"}`:         "events",
	} {
		res := e.do(req{method: "POST", path: "/v1/webhooks", key: key, body: body})
		require.Equal(t, http.StatusBadRequest, res.Status, body)
		require.Contains(t, res.json(t)["error"].(map[string]any)["message"], want, body)
	}
	// The connectors' address rules.
	for _, u := range []string{"http://127.0.0.1:9/x", "http://169.254.169.254/latest", "http://10.0.0.1/x", "ftp://hooks.example.com"} {
		res := e.do(req{method: "POST", path: "/v1/webhooks", key: key, body: map[string]any{"url": u, "events": []string{"verdict.final"}}})
		require.Contains(t, []int{http.StatusUnprocessableEntity, http.StatusBadRequest}, res.Status, u)
		require.NotContains(t, string(res.Body), "169.254", "the answer names no address")
	}

	// Created: the secret once, sealed in the store.
	res := e.do(req{method: "POST", path: "/v1/webhooks", key: key, body: map[string]any{
		"url": "https://93.184.215.14/hooks", "events": []string{"verdict.final", "verdict.final", "verdict.changed"}}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	m := res.json(t)
	id, secret := m["id"].(string), m["secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"))
	require.Equal(t, []any{"verdict.final", "verdict.changed"}, m["events"], "repeats dropped")
	stored, err := e.db.GetWebhook(t.Context(), tid, id)
	require.NoError(t, err)
	require.NotContains(t, stored.Secret, secret[len("whsec_"):])
	opened, err := box.Open(stored.Secret, activities.WebhookSecretAD(tid, id))
	require.NoError(t, err)
	require.Equal(t, secret, string(opened))
	require.NotContains(t, e.logs.String(), secret[len("whsec_"):])

	res = e.do(req{method: "GET", path: "/v1/webhooks", key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.NotContains(t, string(res.Body), "secret")
	require.Contains(t, string(res.Body), id)

	// Another tenant sees none of it.
	_, other := e.tenant("hooks-other")
	res = e.do(req{method: "GET", path: "/v1/webhooks/" + id + "/deliveries", key: other})
	require.Equal(t, http.StatusNotFound, res.Status)
	res = e.do(req{method: "DELETE", path: "/v1/webhooks/" + id, key: other})
	require.Equal(t, http.StatusNotFound, res.Status)

	res = e.do(req{method: "GET", path: "/v1/webhooks/" + id + "/deliveries", key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, []any{}, res.json(t)["deliveries"])
	res = e.do(req{method: "DELETE", path: "/v1/webhooks/" + id, key: key})
	require.Equal(t, http.StatusNoContent, res.Status)
	res = e.do(req{method: "DELETE", path: "/v1/webhooks/" + id, key: key})
	require.Equal(t, http.StatusNotFound, res.Status)

	// Without a secrets key the server refuses to keep a secret.
	e2 := newEnv(t)
	_, key2 := e2.tenant("hooks-nokey")
	res = e2.do(req{method: "POST", path: "/v1/webhooks", key: key2, body: map[string]any{
		"url": "https://hooks.example.com/x", "events": []string{"verdict.final"}}})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
}
