package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// TestStripeConnectorKeySealed: a stripe connector's key is sealed before
// it is stored, answered only as its last 4, never listed, never logged;
// live secret keys and malformed keys are refused, and so is the kind
// without a secrets key.
func TestStripeConnectorKeySealed(t *testing.T) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	box, err := secrets.FromEnv(func(string) string { return base64.StdEncoding.EncodeToString(raw) })
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.Secrets = box })
	tid, key := e.tenant("stripe-connector")

	const apiKey = "rk_test_apiconnectortest9876"
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key,
		Body: map[string]any{"source": "payments", "kind": "stripe", "api_key": apiKey}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "…9876", res.JSON(t)["api_key_last4"])
	require.NotContains(t, string(res.Body), apiKey)

	cs, err := e.db.ListConnectors(context.Background(), tid)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.NotEmpty(t, cs[0].Secret)
	require.NotContains(t, cs[0].Secret, apiKey, "stored sealed")
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/connectors", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.NotContains(t, string(res.Body), apiKey)
	require.NotContains(t, string(res.Body), cs[0].Secret, "not even sealed")

	for name, body := range map[string]map[string]any{
		"live secret key": {"source": "ledger", "kind": "stripe", "api_key": "sk_live_abcdefgh12345678"},
		"malformed key":   {"source": "ledger", "kind": "stripe", "api_key": "pk_test_abcdefgh12345678"},
		"no key":          {"source": "ledger", "kind": "stripe"},
		"key on another kind": {"source": "ledger", "kind": "http_events", "url": "http://feed.example",
			"api_key": "rk_test_abcdefgh12345678"},
	} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: body})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", name, res.Body)
		require.NotContains(t, string(res.Body), "abcdefgh12345678", name)
	}

	nobox := newEnv(t)
	_, key2 := nobox.tenant("stripe-no-secrets")
	res = nobox.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key2,
		Body: map[string]any{"source": "payments", "kind": "stripe", "api_key": apiKey}})
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Contains(t, string(res.Body), secrets.EnvKey)
	require.NotContains(t, string(res.Body), apiKey)
	require.NotContains(t, e.logs.String()+nobox.logs.String(), apiKey, "never logged")
}
