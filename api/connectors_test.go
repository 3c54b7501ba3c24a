package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/stretchr/testify/require"
)

func TestConnectors(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("connectors")
	_, other := e.tenant("connectors-other")

	res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key,
		Body: map[string]string{"source": "ledger", "kind": "http_events", "url": "http://127.0.0.1:9999/ledger"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	m := res.JSON(t)
	require.NotEmpty(t, m["id"])
	require.Equal(t, "ledger", m["source"])
	require.Equal(t, "http_events", m["kind"])
	require.Nil(t, m["last_pull_at"])

	res = e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key,
		Body: map[string]string{"source": "ledger", "kind": "http_events", "url": "https://example.test/ledger"}})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeConflict, res.ErrCode(t))

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/connectors", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct{ Connectors []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &list))
	require.Len(t, list.Connectors, 1)
	require.Equal(t, m["id"], list.Connectors[0]["id"])

	// The connector's source shows in coverage, not yet reported.
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/sources", Key: key})
	var srcs struct{ Sources []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &srcs))
	require.Len(t, srcs.Sources, 1)
	require.Equal(t, false, srcs.Sources[0]["ever_reported"])
	require.Equal(t, m["id"], srcs.Sources[0]["connector_id"])

	// Another tenant sees nothing and may use the same source.
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/connectors", Key: other})
	require.JSONEq(t, `{"connectors":[]}`, string(res.Body))
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/sources", Key: other})
	require.JSONEq(t, `{"sources":[],"span_rejections":[]}`, string(res.Body))
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: other,
		Body: map[string]string{"source": "ledger", "kind": "http_events", "url": "http://127.0.0.1:9999/ledger"}})
	require.Equal(t, http.StatusCreated, res.Status)

	for _, tc := range []struct {
		name string
		body any
		want int
		code string
	}{
		{"malformed", `{"source":`, http.StatusBadRequest, codeInvalidJSON},
		{"unknown field", `{"source":"crm","kind":"http_events","url":"http://x","token":"s"}`, http.StatusBadRequest, codeInvalidRequest},
		{"wrong type", `{"source":"crm","kind":"http_events","url":5}`, http.StatusBadRequest, codeInvalidRequest},
		{"source missing", map[string]string{"kind": "http_events", "url": "http://x"}, http.StatusBadRequest, codeInvalidRequest},
		{"source bad", map[string]string{"source": "c rm", "kind": "http_events", "url": "http://x"}, http.StatusBadRequest, codeInvalidRequest},
		{"kind missing", map[string]string{"source": "crm", "url": "http://x"}, http.StatusBadRequest, codeInvalidRequest},
		{"kind unknown", map[string]string{"source": "crm", "kind": "stripe2", "url": "http://x"}, http.StatusUnprocessableEntity, codeUnsupportedKind},
		{"url missing", map[string]string{"source": "crm", "kind": "http_events"}, http.StatusBadRequest, codeInvalidRequest},
		{"url ftp", map[string]string{"source": "crm", "kind": "http_events", "url": "ftp://x/y"}, http.StatusBadRequest, codeInvalidRequest},
		{"url relative", map[string]string{"source": "crm", "kind": "http_events", "url": "/crm/events"}, http.StatusBadRequest, codeInvalidRequest},
		{"url no host", map[string]string{"source": "crm", "kind": "http_events", "url": "http://"}, http.StatusBadRequest, codeInvalidRequest},
		{"url space", map[string]string{"source": "crm", "kind": "http_events", "url": "http://a b/"}, http.StatusBadRequest, codeInvalidRequest},
		{"over limit", `{"source":"crm","kind":"http_events","url":"http://x/` + strings.Repeat("a", MaxBody) + `"}`, http.StatusRequestEntityTooLarge, codeTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.ErrCode(t))
		})
	}
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/connectors", Key: key})
	require.NoError(t, json.Unmarshal(res.Body, &list))
	require.Len(t, list.Connectors, 1, "no bad request created a connector")
}
