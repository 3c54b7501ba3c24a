package api

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/internal/apitest"
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
		`{"events":["verdict.final"]}`:                                                        "url: is required",
		`{"url":"https://hooks.example.com/x"}`:                                               "events: give one or more of",
		`{"url":"https://hooks.example.com/x","events":["deleted"]}`:                          `events[0]: "deleted" is not an event`,
		`{"url":"https://hooks.example.com/x","events":"x"}`:                                  "events",
		`{"url":7,"events":["verdict.final"]}`:                                                "url",
		`{"url":"https://hooks.example.com/x","events":[]}`:                                   "events: give one or more of",
		`{"url":"https://hooks.example.com/x","events":[""]}`:                                 "events[0]",
		`{"url":"https://hooks.example.com/x","events":["verdict.final"],"secret":"whsec_x"}`: "secret",
		`{"url":"https://hooks.example.com/x","events":["verdict.final"]} {}`:                 "",
		`[]`:              "",
		`{"url":"https:/`: "",
	} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks", Key: key, Body: body})
		require.Equal(t, http.StatusBadRequest, res.Status, body)
		require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], want, body)
	}
	// The connectors' address rules.
	for _, u := range []string{"http://127.0.0.1:9/x", "http://169.254.169.254/latest", "http://10.0.0.1/x", "ftp://hooks.example.com",
		"http://[::1]/x", "http://2130706433/x", "http://localhost/x", "http://metadata.google.internal/x",
		"hooks.example.com/x", "https://user:pw-9431@hooks.example.com/x", "http://%zz/"} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks", Key: key, Body: map[string]any{"url": u, "events": []string{"verdict.final"}}})
		require.Contains(t, []int{http.StatusUnprocessableEntity, http.StatusBadRequest}, res.Status, u)
		require.NotContains(t, string(res.Body), "169.254", "the answer names no address")
		require.NotContains(t, string(res.Body), "pw-9431", "nor a credential")
		require.True(t, strings.HasPrefix(res.JSON(t)["error"].(map[string]any)["message"].(string), "url: "), "%s: %s", u, res.Body)
	}

	// Created: the secret once, sealed in the store.
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks", Key: key, Body: map[string]any{
		"url": "https://93.184.215.14/hooks", "events": []string{"verdict.final", "verdict.final", "verdict.changed"}}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	m := res.JSON(t)
	id, secret := m["id"].(string), m["secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"))
	require.Equal(t, []any{"verdict.final", "verdict.changed"}, m["events"], "repeats dropped")
	stored, err := e.db.GetWebhook(t.Context(), tid, id)
	require.NoError(t, err)
	require.NotContains(t, stored.Secret, secret[len("whsec_"):])
	opened, err := box.Open(stored.Secret, commitlayer.WebhookSecretAD(tid, id))
	require.NoError(t, err)
	require.Equal(t, secret, string(opened))
	require.NotContains(t, e.logs.String(), secret[len("whsec_"):])

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/webhooks", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.NotContains(t, string(res.Body), "secret")
	require.Contains(t, string(res.Body), id)

	// Another tenant sees none of it.
	_, other := e.tenant("hooks-other")
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/webhooks/" + id + "/deliveries", Key: other})
	require.Equal(t, http.StatusNotFound, res.Status)
	res = e.do(apitest.Request{Method: "DELETE", Path: "/v1/webhooks/" + id, Key: other})
	require.Equal(t, http.StatusNotFound, res.Status)

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/webhooks/" + id + "/deliveries", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, []any{}, res.JSON(t)["deliveries"])
	res = e.do(apitest.Request{Method: "DELETE", Path: "/v1/webhooks/" + id, Key: key})
	require.Equal(t, http.StatusNoContent, res.Status)
	res = e.do(apitest.Request{Method: "DELETE", Path: "/v1/webhooks/" + id, Key: key})
	require.Equal(t, http.StatusNotFound, res.Status)

	// Without a secrets key the server refuses to keep a secret.
	e2 := newEnv(t)
	_, key2 := e2.tenant("hooks-nokey")
	res = e2.do(apitest.Request{Method: "POST", Path: "/v1/webhooks", Key: key2, Body: map[string]any{
		"url": "https://hooks.example.com/x", "events": []string{"verdict.final"}}})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
}

// A postgres connector's DSN password is sealed, never stored in clear;
// without a secrets key such a DSN is refused (one without a password is
// kept as given).
func TestPostgresConnectorDSNPasswordSealed(t *testing.T) {
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.Secrets = box })
	tid, key := e.tenant("pg-sealed")
	body := func(source, dsn string) map[string]any {
		return map[string]any{"source": source, "kind": "postgres", "config": map[string]any{
			"dsn": dsn, "queries": []any{map[string]any{"type": "refund_created", "cursor": "id", "subject": "order_id",
				"subject_type": "order", "occurred_at": "created_at",
				"sql": "SELECT id, order_id, created_at FROM refunds WHERE $1::bigint IS NULL OR id > $1::bigint ORDER BY id LIMIT $2"}}}}
	}
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: body("payments", "postgres://reader:pw-api-0042@db.example.com/shop")})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "pw-api-0042")
	cs, err := e.db.ListConnectors(t.Context(), tid)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.NotContains(t, string(cs[0].Config), "pw-api-0042")
	require.Contains(t, string(cs[0].Config), "postgres://reader@db.example.com/shop")
	require.NotEmpty(t, cs[0].Secret)
	require.NotContains(t, e.logs.String(), "pw-api-0042")

	e2 := newEnv(t)
	_, key2 := e2.tenant("pg-nokey")
	res = e2.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key2, Body: body("payments", "postgres://reader:pw-api-0042@db.example.com/shop")})
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], "COMMITLAYER_SECRETS_KEY")
	require.NotContains(t, string(res.Body), "pw-api-0042")
	res = e2.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key2, Body: body("payments", "postgres://reader@db.example.com/shop")})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

func TestWebhookRotate(t *testing.T) {
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.Secrets = box })
	tid, key := e.tenant("rotate")
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks", Key: key, Body: map[string]any{
		"url": "https://93.184.215.14/hooks", "events": []string{"verdict.final"}}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	id, first := res.JSON(t)["id"].(string), res.JSON(t)["secret"].(string)
	signing, err := webhook.DecodeSecret(first)
	require.NoError(t, err, "a Standard Webhooks secret: whsec_<base64>")
	require.Len(t, signing, 32, "24 to 64 random bytes, as the specification asks")
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]+={0,2}$`, first, "standard base64")

	for body, want := range map[string]string{
		`{"overlap":"forever"}`: "overlap:",
		`{"overlap":"-1h"}`:     "overlap:",
		`{"overlap":"169h"}`:    "overlap:",
		`{"overlap":24}`:        "overlap",
		`{"overlapp":"1h"}`:     "overlapp",
	} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/" + id + "/rotate", Key: key, Body: body})
		require.Equal(t, http.StatusBadRequest, res.Status, body)
		require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], want, body)
	}
	require.Equal(t, http.StatusNotFound, e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/wh_nope/rotate", Key: key}).Status)

	// No body: the default overlap.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/" + id + "/rotate", Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	m := res.JSON(t)
	second := m["secret"].(string)
	require.NotEqual(t, first, second)
	require.Equal(t, e.now.Add(DefaultRotationOverlap).Format(time.RFC3339Nano), m["previous_secret_until"])
	stored, err := e.db.GetWebhook(t.Context(), tid, id)
	require.NoError(t, err)
	opened, err := box.Open(stored.Secret, commitlayer.WebhookSecretAD(tid, id))
	require.NoError(t, err)
	require.Equal(t, second, string(opened), "the new secret is the current one, sealed")

	// An overlap named; listed without secrets.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/" + id + "/rotate", Key: key, Body: `{"overlap":"90m"}`})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, e.now.Add(90*time.Minute).Format(time.RFC3339Nano), res.JSON(t)["previous_secret_until"])
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/webhooks", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.NotContains(t, string(res.Body), "whsec_")
	require.Contains(t, string(res.Body), `"previous_secret_until"`)
	// 0s: the old secret stops at once.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/" + id + "/rotate", Key: key, Body: `{"overlap":"0s"}`})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, res.JSON(t), "previous_secret_until")
	require.NotContains(t, e.logs.String(), second[len("whsec_"):])
}

// A webhook disabled by a 410 Gone shows so, and enabling it clears it.
func TestWebhookEnable(t *testing.T) {
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.Secrets = box })
	tid, key := e.tenant("enable")
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks", Key: key, Body: map[string]any{
		"url": "https://93.184.215.14/hooks", "events": []string{"verdict.final"}}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	id := res.JSON(t)["id"].(string)
	require.Equal(t, true, res.JSON(t)["enabled"])

	require.NoError(t, e.db.DisableWebhook(t.Context(), tid, id, "http 410", e.now))
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/webhooks", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	hook := res.JSON(t)["webhooks"].([]any)[0].(map[string]any)
	require.Equal(t, false, hook["enabled"])
	require.Equal(t, "http 410", hook["disabled_reason"])
	require.NotEmpty(t, hook["disabled_at"])

	res = e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/" + id + "/enable", Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	m := res.JSON(t)
	require.Equal(t, true, m["enabled"])
	require.NotContains(t, m, "disabled_at")
	require.NotContains(t, m, "secret")
	require.Equal(t, http.StatusNotFound, e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/wh_nope/enable", Key: key}).Status)
	_, other := e.tenant("enable-other")
	require.Equal(t, http.StatusNotFound, e.do(apitest.Request{Method: "POST", Path: "/v1/webhooks/" + id + "/enable", Key: other}).Status)
}

// The body a delivery carries is the one the OpenAPI document describes
// (components.schemas.WebhookEvent).
func TestWebhookEventMatchesTheDocument(t *testing.T) {
	d := openAPISpec(t)
	ref := d.Components.Schemas["WebhookEvent"]
	require.NotNil(t, ref)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	body, err := webhook.Event{ID: "evt_1", Type: webhook.EventVerdictFinal, ActionID: "act_1", Sequence: 2,
		Verdict: commitlayer.Verdict{ActionID: "act_1", Status: commitlayer.StatusFail, Version: 2, EvaluatedAt: at,
			SettlesAt: at, Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass},
			Findings: []commitlayer.Finding{{Code: commitlayer.CodeMissingEffect, Check: "refund", Lens: commitlayer.LensOutcome,
				Message: "no refund"}}}}.Body()
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(body, &v))
	require.NoError(t, ref.Value.VisitJSON(v))
}
