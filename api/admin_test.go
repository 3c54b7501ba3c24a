package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/stretchr/testify/require"
)

func TestAdminRoutesDisabledWithoutAdminKey(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AdminKey = "" })
	for _, k := range []string{"", "anything"} {
		res := e.do(apitest.Request{Method: "GET", Path: "/v1/admin/tenants", Key: k})
		require.Equal(t, http.StatusUnauthorized, res.Status)
	}
	res := e.do(apitest.Request{Method: "GET", Path: "/v1/admin/tenants", Header: map[string]string{"Authorization": "Bearer"}})
	require.Equal(t, http.StatusUnauthorized, res.Status)
}

func TestAdminTenants(t *testing.T) {
	e := newEnv(t)
	id, key := e.tenant("  Acme Support  ")
	require.NotEmpty(t, key)
	res := e.do(apitest.Request{Method: "GET", Path: "/v1/admin/tenants", Key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct{ Tenants []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &list))
	found := false
	for _, tn := range list.Tenants {
		if tn["id"] == id {
			found = true
			require.Equal(t, "Acme Support", tn["name"])
		}
		require.NotContains(t, tn, "api_key", "keys are shown once")
	}
	require.True(t, found)
	// The new key works on tenant routes.
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts", Key: key})
	require.Equal(t, http.StatusOK, res.Status)

	for _, tc := range []struct {
		name string
		body any
		want int
		code string
	}{
		{"malformed", `{"name"`, http.StatusBadRequest, codeInvalidJSON},
		{"missing", `{}`, http.StatusBadRequest, codeInvalidRequest},
		{"blank", `{"name":"  "}`, http.StatusBadRequest, codeInvalidRequest},
		{"wrong type", `{"name":5}`, http.StatusBadRequest, codeInvalidRequest},
		{"unknown field", `{"name":"x","plan":"pro"}`, http.StatusBadRequest, codeInvalidRequest},
		{"too long", map[string]string{"name": strings.Repeat("n", 201)}, http.StatusBadRequest, codeInvalidRequest},
		{"NUL", map[string]string{"name": "a\u0000b"}, http.StatusBadRequest, codeInvalidRequest},
		{"over limit", map[string]string{"name": strings.Repeat("n", MaxBody)}, http.StatusRequestEntityTooLarge, codeTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/tenants", Key: adminKey, Body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.ErrCode(t))
		})
	}
}
