package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

// widgetDoc documents the test's mounted routes, as a mount's author
// would.
const widgetDoc = `{
  "paths": {
    "/v1/admin/widgets": {
      "post": {
        "operationId": "postWidget",
        "security": [{"adminKey": []}],
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Widget"}}}},
        "responses": {
          "201": {"description": "Made", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Widget"}}}},
          "400": {"$ref": "#/components/responses/E400"},
          "401": {"$ref": "#/components/responses/E401"},
          "403": {"$ref": "#/components/responses/E403"},
          "409": {"$ref": "#/components/responses/E409"},
          "413": {"$ref": "#/components/responses/E413"},
          "415": {"$ref": "#/components/responses/E415"},
          "500": {"$ref": "#/components/responses/E500"},
          "503": {"$ref": "#/components/responses/E503"}
        }
      }
    }
  },
  "components": {"schemas": {"Widget": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}, "additionalProperties": false}}}
}`

type widget struct {
	Name string `json:"name"`
}

// widgetMounts answers POST /v1/admin/widgets: 201 with the widget, the
// handler's own 409 for "taken", a store that is away for "away", an
// internal error for "boom".
func widgetMounts() []Mount {
	return []Mount{{Pattern: "POST /v1/admin/widgets", JSONBody: true, Handler: func(w http.ResponseWriter, r *http.Request) error {
		var in widget
		if err := DecodeJSON(w, r, &in); err != nil {
			return err
		}
		switch in.Name {
		case "":
			return Errorf(http.StatusBadRequest, CodeInvalidRequest, "name: is required")
		case "taken":
			return Errorf(http.StatusConflict, CodeConflict, "widget %s exists", in.Name)
		case "away":
			return fmt.Errorf("store widget: %w", commitlayer.ErrUnavailable)
		case "boom":
			return errors.New("widget store at 10.9.8.7 failed (secret detail)")
		}
		WriteJSON(w, http.StatusCreated, in)
		return nil
	}}}
}

// TestMounts: a mounted route is an admin route like the API's own (auth,
// request id, error shape, 415, 405, metrics, logging of internal errors
// with no detail in the answer), and its fragment is in /openapi.json.
func TestMounts(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Mounts = widgetMounts()
		c.OpenAPIFragments = [][]byte{[]byte(widgetDoc)}
	})
	_, tenantKey := e.tenant("mounts")

	res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/widgets", Key: adminKey, Body: widget{Name: "w1"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"name":"w1"}`, string(res.Body))
	require.Equal(t, http.StatusUnauthorized, e.do(apitest.Request{Method: "POST", Path: "/v1/admin/widgets", Body: widget{Name: "w"}}).Status)
	require.Equal(t, http.StatusForbidden, e.do(apitest.Request{Method: "POST", Path: "/v1/admin/widgets", Key: tenantKey, Body: widget{Name: "w"}}).Status)

	for _, tc := range []struct {
		body   string
		header map[string]string
		status int
		code   string
	}{
		{`{"name":""}`, nil, http.StatusBadRequest, codeInvalidRequest},
		{`{"name":"taken"}`, nil, http.StatusConflict, codeConflict},
		{`{"name":"a","name":"b"}`, nil, http.StatusBadRequest, codeInvalidJSON},
		{`{"name":"a","color":"red"}`, nil, http.StatusBadRequest, codeInvalidRequest},
		{`{"name":"a"}`, map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType, codeUnsupportedMediaType},
		{`{"name":"` + strings.Repeat("x", MaxBody) + `"}`, nil, http.StatusRequestEntityTooLarge, codeTooLarge},
		{`{"name":"away"}`, nil, http.StatusServiceUnavailable, codeUnavailable},
		{`{"name":"boom"}`, nil, http.StatusInternalServerError, codeInternal},
	} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/widgets", Key: adminKey, Body: tc.body, Header: tc.header})
		require.Equal(t, tc.status, res.Status, "%s: %s", tc.body[:min(len(tc.body), 40)], res.Body)
		require.Equal(t, tc.code, res.ErrCode(t))
		require.NotContains(t, string(res.Body), "secret detail")
	}
	require.Contains(t, e.logs.String(), "secret detail", "the internal error is logged")

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/admin/widgets", Key: adminKey})
	require.Equal(t, http.StatusMethodNotAllowed, res.Status)
	require.Equal(t, "POST", res.Header.Get("Allow"))

	var routes []string
	for _, rt := range e.srv.Routes() {
		routes = append(routes, rt.Pattern())
	}
	require.Contains(t, routes, "POST /v1/admin/widgets")

	res = e.do(apitest.Request{Method: "GET", Path: "/openapi.json"})
	require.Equal(t, http.StatusOK, res.Status)
	var doc struct {
		Paths      map[string]json.RawMessage
		Components struct{ Schemas map[string]json.RawMessage }
	}
	require.NoError(t, json.Unmarshal(res.Body, &doc))
	require.Contains(t, doc.Paths, "/v1/admin/widgets")
	require.Contains(t, doc.Paths, "/v1/actions", "the API's own paths stay")
	require.Contains(t, doc.Components.Schemas, "Widget")
	require.Contains(t, doc.Components.Schemas, "Error")
}

// TestMountConflicts: a fragment that documents an existing path or
// component, or a mount without a method, is a wiring mistake New refuses.
func TestMountConflicts(t *testing.T) {
	for name, cfg := range map[string]func(*Config){
		"documented path": func(c *Config) {
			c.OpenAPIFragments = [][]byte{[]byte(`{"paths":{"/v1/actions/{id}":{}}}`)}
		},
		"defined schema": func(c *Config) {
			c.OpenAPIFragments = [][]byte{[]byte(`{"components":{"schemas":{"Error":{}}}}`)}
		},
		"not a fragment": func(c *Config) { c.OpenAPIFragments = [][]byte{[]byte(`{"info":{}}`)} },
		"no method":      func(c *Config) { c.Mounts = []Mount{{Pattern: "/v1/admin/x", Handler: widgetMounts()[0].Handler}} },
		"no handler":     func(c *Config) { c.Mounts = []Mount{{Pattern: "GET /v1/admin/x"}} },
		"route taken": func(c *Config) {
			c.Mounts = []Mount{{Pattern: "GET /v1/admin/tenants", Handler: widgetMounts()[0].Handler}}
		},
	} {
		require.Panics(t, func() { newEnv(t, cfg) }, name)
	}
}
