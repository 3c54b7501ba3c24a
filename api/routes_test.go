package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// fillPath puts a value in each {wildcard} of a route path.
func fillPath(p string) string {
	for strings.Contains(p, "{") {
		i, j := strings.Index(p, "{"), strings.Index(p, "}")
		p = p[:i] + "x" + p[j+1:]
	}
	return p
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("auth")
	ctx := context.Background()
	tenantsBefore, err := e.db.ListTenants(ctx)
	require.NoError(t, err)

	for _, rt := range e.srv.Routes() {
		if rt.auth == authNone {
			continue
		}
		path := fillPath(rt.Path)
		t.Run(rt.Pattern(), func(t *testing.T) {
			cases := []struct {
				name   string
				header map[string]string
				key    string
				want   int
			}{
				{"missing", nil, "", http.StatusUnauthorized},
				{"not bearer", map[string]string{"Authorization": "Basic " + key}, "", http.StatusUnauthorized},
				{"empty bearer", map[string]string{"Authorization": "Bearer "}, "", http.StatusUnauthorized},
				{"wrong key", nil, "cl_nope_nope", http.StatusUnauthorized},
				{"garbage key", nil, "x\x7f\xff", http.StatusUnauthorized},
			}
			if rt.auth == authTenant {
				cases = append(cases, struct {
					name   string
					header map[string]string
					key    string
					want   int
				}{"admin key", nil, adminKey, http.StatusUnauthorized})
			} else {
				cases = append(cases, struct {
					name   string
					header map[string]string
					key    string
					want   int
				}{"tenant key", nil, key, http.StatusForbidden})
			}
			for _, tc := range cases {
				res := e.do(req{method: rt.Method, path: path, key: tc.key, header: tc.header, body: `{"name":"intruder"}`})
				require.Equal(t, tc.want, res.Status, "%s: %s", tc.name, res.Body)
				if tc.want == http.StatusUnauthorized {
					require.Equal(t, codeUnauthorized, res.errCode(t), tc.name)
					require.NotEmpty(t, res.Header.Get("WWW-Authenticate"))
				} else {
					require.Equal(t, codeForbidden, res.errCode(t), tc.name)
				}
			}
		})
	}
	// Nothing got through: no tenant was created by a refused request.
	tenantsAfter, err := e.db.ListTenants(ctx)
	require.NoError(t, err)
	require.Equal(t, len(tenantsBefore), len(tenantsAfter))
}

func TestAdminRoutesDisabledWithoutAdminKey(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AdminKey = "" })
	for _, k := range []string{"", "anything"} {
		res := e.do(req{method: "GET", path: "/v1/admin/tenants", key: k})
		require.Equal(t, http.StatusUnauthorized, res.Status)
	}
	res := e.do(req{method: "GET", path: "/v1/admin/tenants", header: map[string]string{"Authorization": "Bearer"}})
	require.Equal(t, http.StatusUnauthorized, res.Status)
}

func TestContracts(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("contracts")
	_, other := e.tenant("contracts-other")

	res := e.do(req{method: "POST", path: "/v1/contracts", key: key, body: payoutContract})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	m := res.json(t)
	require.Equal(t, "send_payout", m["id"])
	require.EqualValues(t, 1, m["version"])
	require.Equal(t, "/v1/contracts/send_payout?version=1", res.Header.Get("Location"))

	// The same source again is the same version.
	res = e.do(req{method: "POST", path: "/v1/contracts", key: key, body: payoutContract})
	require.Equal(t, http.StatusOK, res.Status)
	require.EqualValues(t, 1, res.json(t)["version"])

	// A change is a new version; JSON is accepted as well as YAML.
	v2 := strings.Replace(payoutContract, "watch: 1h", "watch: 2h", 1)
	res = e.do(req{method: "POST", path: "/v1/contracts", key: key, body: v2})
	require.Equal(t, http.StatusCreated, res.Status)
	require.EqualValues(t, 2, res.json(t)["version"])
	res = e.do(req{method: "POST", path: "/v1/contracts", key: key, header: map[string]string{"Content-Type": "application/json"},
		body: `{"id":"json_contract","kind":"action","settlement":"1m","watch":"1m","sources":["tickets"],
		"effects":[{"id":"note","source":"tickets","type":"note_added"}]}`})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	res = e.do(req{method: "GET", path: "/v1/contracts", key: key})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct {
		Contracts []struct {
			ID      string
			Version int
			Source  *string
		}
	}
	require.NoError(t, json.Unmarshal(res.Body, &list))
	require.Len(t, list.Contracts, 2)
	require.Equal(t, "json_contract", list.Contracts[0].ID)
	require.Equal(t, "send_payout", list.Contracts[1].ID)
	require.Equal(t, 2, list.Contracts[1].Version)
	require.Nil(t, list.Contracts[1].Source)

	res = e.do(req{method: "GET", path: "/v1/contracts/send_payout", key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.EqualValues(t, 2, res.json(t)["version"])
	require.Equal(t, v2, res.json(t)["source"])
	res = e.do(req{method: "GET", path: "/v1/contracts/send_payout?version=1", key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, payoutContract, res.json(t)["source"])

	for _, tc := range []struct {
		path string
		want int
		code string
	}{
		{"/v1/contracts/send_payout?version=9", http.StatusNotFound, codeNotFound},
		{"/v1/contracts/send_payout?version=0", http.StatusBadRequest, codeInvalidRequest},
		{"/v1/contracts/send_payout?version=-1", http.StatusBadRequest, codeInvalidRequest},
		{"/v1/contracts/send_payout?version=abc", http.StatusBadRequest, codeInvalidRequest},
		{"/v1/contracts/nope", http.StatusNotFound, codeNotFound},
		{"/v1/contracts/%00", http.StatusNotFound, codeNotFound},
		{"/v1/contracts/%ff%fe", http.StatusNotFound, codeNotFound},
	} {
		res := e.do(req{method: "GET", path: tc.path, key: key})
		require.Equal(t, tc.want, res.Status, "%s: %s", tc.path, res.Body)
		require.Equal(t, tc.code, res.errCode(t), tc.path)
	}

	// Another tenant sees none of it.
	res = e.do(req{method: "GET", path: "/v1/contracts/send_payout", key: other})
	require.Equal(t, http.StatusNotFound, res.Status)
	require.NotContains(t, string(res.Body), "ledger")
	res = e.do(req{method: "GET", path: "/v1/contracts", key: other})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"contracts":[]}`, string(res.Body))
}

func TestContractsBadInput(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("contracts-bad")
	for _, tc := range []struct {
		name     string
		body     string
		want     int
		code     string
		contains []string
	}{
		{"empty", "", http.StatusBadRequest, codeInvalidRequest, nil},
		{"blank", "  \n ", http.StatusBadRequest, codeInvalidRequest, nil},
		{"yaml syntax", "id: [unclosed\n", http.StatusUnprocessableEntity, codeInvalidContract, []string{"line"}},
		{"bad cel", strings.Replace(payoutContract, "params.amount > 0", "params.amount >>> 0", 1),
			http.StatusUnprocessableEntity, codeInvalidContract, []string{"policy[0].rule", "line 9"}},
		{"unknown field", payoutContract + "colour: blue\n", http.StatusUnprocessableEntity, codeInvalidContract, []string{"colour"}},
		{"missing id", strings.Replace(payoutContract, "id: send_payout\n", "", 1), http.StatusUnprocessableEntity, codeInvalidContract, []string{"id"}},
		{"json array", `[1,2]`, http.StatusUnprocessableEntity, codeInvalidContract, nil},
		{"over limit", payoutContract + "# " + strings.Repeat("x", MaxBody) + "\n", http.StatusRequestEntityTooLarge, codeTooLarge, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(req{method: "POST", path: "/v1/contracts", key: key, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t))
			for _, c := range tc.contains {
				require.Contains(t, string(res.Body), c)
			}
		})
	}
	res := e.do(req{method: "GET", path: "/v1/contracts", key: key})
	require.JSONEq(t, `{"contracts":[]}`, string(res.Body), "nothing was stored")
}

func TestFacts(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("facts")
	_, other := e.tenant("facts-other")

	batch := map[string]any{"facts": []any{
		fact(1, "account:acc_1"), fact(2, "account:acc_2"),
		map[string]any{"source": "tickets", "type": "note_added", "subject": "ticket:t_9", "external_id": "tickets-1",
			"occurred_at": "2026-11-29T10:00:01.5+01:00", "attrs": map[string]any{"amount": 2500.0, "body": "done"},
			"links": []string{"order:o_1"}, "seq": 77},
	}}
	res := e.do(req{method: "POST", path: "/v1/facts", key: key, body: batch})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"inserted":3,"duplicates":0}`, string(res.Body))
	require.Len(t, e.ver.arrived, 1)
	require.Equal(t, []commitlayer.Subject{"account:acc_1", "account:acc_2", "order:o_1", "ticket:t_9"}, e.ver.arrived[0])

	// Stored as given, attrs normalized (2500.0 is the integer 2500), time in UTC.
	got, err := e.db.FactsOfKinds(context.Background(), tenantID(t, e, key), []commitlayer.FactType{{Source: "tickets", Type: "note_added"}}, time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(2500), got[0].Attrs["amount"])
	require.Equal(t, time.Date(2026, 11, 29, 9, 0, 1, 500_000_000, time.UTC), got[0].OccurredAt.UTC())
	require.Equal(t, []commitlayer.Subject{"order:o_1"}, got[0].Links)

	// Posting again: all duplicates, nothing new to notify.
	res = e.do(req{method: "POST", path: "/v1/facts", key: key, body: batch})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"inserted":0,"duplicates":3}`, string(res.Body))
	require.Len(t, e.ver.arrived, 1)

	// Another tenant's facts are its own: the same external ids insert.
	res = e.do(req{method: "POST", path: "/v1/facts", key: other, body: batch})
	require.JSONEq(t, `{"inserted":3,"duplicates":0}`, string(res.Body))

	// A failed notification is logged; the write stands.
	e.ver.arrivedErr = fmt.Errorf("temporal down")
	res = e.do(req{method: "POST", path: "/v1/facts", key: key, body: map[string]any{"facts": []any{fact(3, "account:acc_3")}}})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"inserted":1,"duplicates":0}`, string(res.Body))
	require.Contains(t, e.logs.String(), "temporal down")
	require.Contains(t, e.logs.String(), res.Header.Get("X-Request-Id"))

	res = e.do(req{method: "GET", path: "/v1/sources", key: key})
	require.Equal(t, http.StatusOK, res.Status)
	var srcs struct {
		Sources []struct {
			Source       string     `json:"source"`
			EverReported bool       `json:"ever_reported"`
			FactCount    int64      `json:"fact_count"`
			LastFactAt   *time.Time `json:"last_fact_at"`
		} `json:"sources"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &srcs))
	require.Len(t, srcs.Sources, 2)
	require.Equal(t, "ledger", srcs.Sources[0].Source)
	require.True(t, srcs.Sources[0].EverReported)
	require.EqualValues(t, 3, srcs.Sources[0].FactCount)
	require.NotNil(t, srcs.Sources[0].LastFactAt)
	require.Equal(t, "tickets", srcs.Sources[1].Source)
}

// tenantID resolves a key through the store.
func tenantID(t testing.TB, e *env, key string) string {
	t.Helper()
	tn, err := e.db.TenantByAPIKey(context.Background(), key)
	require.NoError(t, err)
	return tn.ID
}

func TestFactsBadInput(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("facts-bad")
	good := func(i int) map[string]any { return fact(i, "account:acc_1") }
	with := func(k string, v any) map[string]any {
		f := good(9)
		if v == nil {
			delete(f, k)
		} else {
			f[k] = v
		}
		return f
	}
	batch := func(bad map[string]any) map[string]any {
		return map[string]any{"facts": []any{good(1), good(2), good(3), bad}}
	}
	for _, tc := range []struct {
		name     string
		body     any
		want     int
		code     string
		contains string
	}{
		{"empty body", "", http.StatusBadRequest, codeInvalidJSON, ""},
		{"malformed", `{"facts": [`, http.StatusBadRequest, codeInvalidJSON, ""},
		{"syntax", `{"facts": [}`, http.StatusBadRequest, codeInvalidJSON, ""},
		{"trailing data", `{"facts": []} {}`, http.StatusBadRequest, codeInvalidJSON, ""},
		{"array body", `[]`, http.StatusBadRequest, codeInvalidRequest, ""},
		{"string body", `"facts"`, http.StatusBadRequest, codeInvalidRequest, ""},
		{"facts missing", `{}`, http.StatusBadRequest, codeInvalidRequest, "facts"},
		{"facts null", `{"facts": null}`, http.StatusBadRequest, codeInvalidRequest, "facts"},
		{"facts empty", `{"facts": []}`, http.StatusBadRequest, codeInvalidRequest, "at least one"},
		{"facts wrong type", `{"facts": "many"}`, http.StatusBadRequest, codeInvalidRequest, "facts: expected an array, got a string"},
		{"facts twice", `{"facts": [], "facts": []}`, http.StatusBadRequest, codeInvalidRequest, "twice"},
		{"fact not object", `{"facts": [1]}`, http.StatusBadRequest, codeInvalidRequest, "facts[0]"},
		{"unknown top field", `{"facts": [], "extra": 1}`, http.StatusBadRequest, codeInvalidRequest, "extra"},
		{"unknown fact field", batch(with("colour", "blue")), http.StatusBadRequest, codeInvalidRequest, `facts[3]: unknown field \"colour\"`},
		{"source wrong type", batch(with("source", 5)), http.StatusBadRequest, codeInvalidRequest, "facts[3].source: expected a string"},
		{"attrs wrong type", batch(with("attrs", []int{1})), http.StatusBadRequest, codeInvalidRequest, "facts[3].attrs"},
		{"links wrong type", batch(with("links", "order:o_1")), http.StatusBadRequest, codeInvalidRequest, "facts[3].links: expected an array"},
		{"subject not type:id", batch(with("subject", "acc_1")), http.StatusBadRequest, codeInvalidRequest, "facts[3].subject"},
		{"subject bad type", batch(with("subject", "Account:acc_1")), http.StatusBadRequest, codeInvalidRequest, "facts[3].subject"},
		{"link not type:id", batch(with("links", []string{"nope"})), http.StatusBadRequest, codeInvalidRequest, "facts[3].links[0]"},
		{"source missing", batch(with("source", nil)), http.StatusBadRequest, codeInvalidRequest, "facts[3].source"},
		{"source bad", batch(with("source", "led ger")), http.StatusBadRequest, codeInvalidRequest, "facts[3].source"},
		{"type missing", batch(with("type", nil)), http.StatusBadRequest, codeInvalidRequest, "facts[3].type"},
		{"external_id missing", batch(with("external_id", "")), http.StatusBadRequest, codeInvalidRequest, "facts[3].external_id"},
		{"occurred_at missing", batch(with("occurred_at", nil)), http.StatusBadRequest, codeInvalidRequest, "facts[3].occurred_at"},
		{"occurred_at not rfc3339", batch(with("occurred_at", "29/11/2026")), http.StatusBadRequest, codeInvalidRequest, "facts[3].occurred_at"},
		{"occurred_at number", batch(with("occurred_at", 1732870000)), http.StatusBadRequest, codeInvalidRequest, "facts[3].occurred_at"},
		{"NUL in type", batch(with("type", "pay\u0000out")), http.StatusBadRequest, codeInvalidRequest, "facts[3].type"},
		{"NUL in attrs", batch(with("attrs", map[string]any{"note": "a\u0000b"})), http.StatusBadRequest, codeInvalidRequest, "facts[3].attrs"},
		{"NUL in attr key", batch(with("attrs", map[string]any{"a\u0000": 1})), http.StatusBadRequest, codeInvalidRequest, "facts[3].attrs"},
		{"number out of range", `{"facts":[{"source":"ledger","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","attrs":{"n":1e999}}]}`,
			http.StatusBadRequest, codeInvalidRequest, "facts[0].attrs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(req{method: "POST", path: "/v1/facts", key: key, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t), "%s", res.Body)
			require.Contains(t, string(res.Body), tc.contains)
		})
	}
	// Over 8 MiB: 413, and nothing stored.
	var big strings.Builder
	big.WriteString(`{"facts":[`)
	pad := strings.Repeat("x", 1000)
	for i := 0; big.Len() <= MaxFactsBody; i++ {
		if i > 0 {
			big.WriteString(",")
		}
		fmt.Fprintf(&big, `{"source":"ledger","type":"t","subject":"a:b","external_id":"big-%d","occurred_at":"2026-11-29T10:00:00Z","attrs":{"pad":%q}}`, i, pad)
	}
	big.WriteString("]}")
	res := e.do(req{method: "POST", path: "/v1/facts", key: key, body: big.String()})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status)
	require.Equal(t, codeTooLarge, res.errCode(t))

	// No batch landed partly: the tenant has no facts at all.
	res = e.do(req{method: "GET", path: "/v1/sources", key: key})
	require.JSONEq(t, `{"sources":[]}`, string(res.Body))
	require.Empty(t, e.ver.arrived)
}

func TestConnectors(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("connectors")
	_, other := e.tenant("connectors-other")

	res := e.do(req{method: "POST", path: "/v1/connectors", key: key,
		body: map[string]string{"source": "ledger", "kind": "http_events", "url": "http://127.0.0.1:9999/ledger"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	m := res.json(t)
	require.NotEmpty(t, m["id"])
	require.Equal(t, "ledger", m["source"])
	require.Equal(t, "http_events", m["kind"])
	require.Nil(t, m["last_pull_at"])

	res = e.do(req{method: "POST", path: "/v1/connectors", key: key,
		body: map[string]string{"source": "ledger", "kind": "http_events", "url": "https://example.test/ledger"}})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeConflict, res.errCode(t))

	res = e.do(req{method: "GET", path: "/v1/connectors", key: key})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct{ Connectors []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &list))
	require.Len(t, list.Connectors, 1)
	require.Equal(t, m["id"], list.Connectors[0]["id"])

	// The connector's source shows in coverage, not yet reported.
	res = e.do(req{method: "GET", path: "/v1/sources", key: key})
	var srcs struct{ Sources []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &srcs))
	require.Len(t, srcs.Sources, 1)
	require.Equal(t, false, srcs.Sources[0]["ever_reported"])
	require.Equal(t, m["id"], srcs.Sources[0]["connector_id"])

	// Another tenant sees nothing and may use the same source.
	res = e.do(req{method: "GET", path: "/v1/connectors", key: other})
	require.JSONEq(t, `{"connectors":[]}`, string(res.Body))
	res = e.do(req{method: "GET", path: "/v1/sources", key: other})
	require.JSONEq(t, `{"sources":[]}`, string(res.Body))
	res = e.do(req{method: "POST", path: "/v1/connectors", key: other,
		body: map[string]string{"source": "ledger", "kind": "http_events", "url": "http://127.0.0.1:9999/ledger"}})
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
			res := e.do(req{method: "POST", path: "/v1/connectors", key: key, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t))
		})
	}
	res = e.do(req{method: "GET", path: "/v1/connectors", key: key})
	require.NoError(t, json.Unmarshal(res.Body, &list))
	require.Len(t, list.Connectors, 1, "no bad request created a connector")
}

func TestActions(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("actions")
	_, other := e.tenant("actions-other")
	e.contract(key, payoutContract)

	res := e.do(req{method: "POST", path: "/v1/actions", key: key, body: map[string]any{
		"contract": "send_payout", "agent": "agent-1", "subject": "account:acc_1",
		"params": map[string]any{"amount": 2500, "currency": "USD"},
		"claim":  map[string]string{"status": "success", "message": "paid"},
		"trace":  []any{map[string]any{"tool": "payout", "ok": true}},
	}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	m := res.json(t)
	id := m["id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "/v1/actions/"+id, m["verdict_url"])
	require.Equal(t, "/v1/actions/"+id, res.Header.Get("Location"))
	require.Equal(t, []string{tid + "/" + id}, e.ver.startCalls())

	res = e.do(req{method: "GET", path: "/v1/actions/" + id, key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct {
		Action struct {
			commitlayer.Action
			SettlesAt  time.Time `json:"settles_at"`
			WatchUntil time.Time `json:"watch_until"`
		} `json:"action"`
		Verdict *commitlayer.Verdict  `json:"verdict"`
		History []commitlayer.Verdict `json:"history"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Equal(t, id, got.Action.ID)
	require.Equal(t, 1, got.Action.ContractVersion)
	require.Equal(t, "agent-1", got.Action.Agent)
	require.Equal(t, commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}, got.Action.Params)
	require.True(t, e.now.Equal(got.Action.RequestedAt), "requested_at defaults to now")
	require.True(t, e.now.Add(10*time.Minute).Equal(got.Action.SettlesAt))
	require.True(t, e.now.Add(10*time.Minute+time.Hour).Equal(got.Action.WatchUntil))
	require.JSONEq(t, `[{"ok":true,"tool":"payout"}]`, string(got.Action.Trace))
	require.Nil(t, got.Verdict)
	require.Empty(t, got.History)
	require.Contains(t, string(res.Body), `"verdict":null`)
	require.Contains(t, string(res.Body), `"history":[]`)

	// Verdicts appear once stored: the current one and the history.
	ctx := context.Background()
	v1 := commitlayer.Verdict{ActionID: id, Status: commitlayer.StatusPass, Provisional: true,
		Lenses:      commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass},
		EvaluatedAt: e.now, SettlesAt: e.now.Add(10 * time.Minute)}
	_, _, err := e.db.AppendVerdict(ctx, tid, v1)
	require.NoError(t, err)
	v2 := v1
	v2.Provisional, v2.Status, v2.Lenses.Outcome = false, commitlayer.StatusFail, commitlayer.StatusFail
	v2.Findings = []commitlayer.Finding{{Code: commitlayer.CodeMissingEffect, Check: "payout", Lens: commitlayer.LensOutcome, Message: "no payout_sent"}}
	_, _, err = e.db.AppendVerdict(ctx, tid, v2)
	require.NoError(t, err)
	res = e.do(req{method: "GET", path: "/v1/actions/" + id, key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.NotNil(t, got.Verdict)
	require.Equal(t, commitlayer.StatusFail, got.Verdict.Status)
	require.Equal(t, 2, got.Verdict.Version)
	require.Len(t, got.History, 2)
	require.True(t, got.History[0].Provisional)
	require.Equal(t, 1, got.History[0].Version)

	// An explicit requested_at drives the windows.
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, body: map[string]any{
		"contract": "send_payout", "agent": "agent-1", "subject": "account:acc_2", "requested_at": at.Format(time.RFC3339),
	}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	rec, err := e.db.GetAction(ctx, tid, res.json(t)["id"].(string))
	require.NoError(t, err)
	require.True(t, at.Equal(rec.RequestedAt))
	require.True(t, at.Add(10*time.Minute).Equal(rec.SettlesAt))
	require.True(t, at.Add(70*time.Minute).Equal(rec.WatchUntil))

	// A pinned contract version, and a contract without a subject type.
	e.contract(key, strings.Replace(payoutContract, "settlement: 10m", "settlement: 20m", 1))
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, body: map[string]any{
		"contract": "send_payout", "contract_version": 1, "agent": "a", "subject": "account:acc_3", "requested_at": at.Format(time.RFC3339),
	}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	rec, err = e.db.GetAction(ctx, tid, res.json(t)["id"].(string))
	require.NoError(t, err)
	require.Equal(t, 1, rec.ContractVersion)
	require.True(t, at.Add(10*time.Minute).Equal(rec.SettlesAt))
	e.contract(key, anyContract)
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, body: map[string]any{
		"contract": "note_anything", "agent": "a", "subject": "whatever:w_1"}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)

	// Another tenant gets 404 and none of the action's data.
	for _, p := range []string{"GET /v1/actions/" + id, "POST /v1/actions/" + id + "/recheck"} {
		method, path, _ := strings.Cut(p, " ")
		res = e.do(req{method: method, path: path, key: other})
		require.Equal(t, http.StatusNotFound, res.Status, p)
		require.Equal(t, codeNotFound, res.errCode(t))
		require.NotContains(t, string(res.Body), "agent-1")
	}
	res = e.do(req{method: "GET", path: "/v1/actions/act_nope", key: key})
	require.Equal(t, http.StatusNotFound, res.Status)
	res = e.do(req{method: "GET", path: "/v1/actions/%00", key: key})
	require.Equal(t, http.StatusNotFound, res.Status)
}

func TestActionsIdempotency(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("idem")
	e.contract(key, payoutContract)
	idem := map[string]string{"Idempotency-Key": "k-1"}

	body := `{"contract":"send_payout","agent":"a1","subject":"account:acc_1","params":{"amount":2500,"currency":"USD"}}`
	res := e.do(req{method: "POST", path: "/v1/actions", key: key, header: idem, body: body})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	id := res.json(t)["id"].(string)
	require.Empty(t, res.Header.Get("Idempotent-Replayed"))

	// The same request, written differently (key order, spacing, 2500.0),
	// a minute later: the same action, and no second start.
	e.now = e.now.Add(time.Minute)
	same := `{ "subject": "account:acc_1", "params": {"currency": "USD", "amount": 2500.0},
		"agent": "a1", "contract": "send_payout" }`
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, header: idem, body: same})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, id, res.json(t)["id"])
	require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"))
	require.Equal(t, []string{tid + "/" + id}, e.ver.startCalls())

	// The same key with another body: 409, nothing started.
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, header: idem,
		body: strings.Replace(body, "2500", "2600", 1)})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeIdempotency, res.errCode(t))
	require.Len(t, e.ver.startCalls(), 1)

	// The key is per tenant.
	_, other := e.tenant("idem-other")
	e.contract(other, payoutContract)
	res = e.do(req{method: "POST", path: "/v1/actions", key: other, header: idem, body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.NotEqual(t, id, res.json(t)["id"])

	// A client-given id is idempotent the same way.
	withID := `{"id":"my-action-1","contract":"send_payout","agent":"a1","subject":"account:acc_9"}`
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, body: withID})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "my-action-1", res.json(t)["id"])
	n := len(e.ver.startCalls())
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, body: withID})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, "my-action-1", res.json(t)["id"])
	require.Len(t, e.ver.startCalls(), n)
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, body: strings.Replace(withID, "a1", "a2", 1)})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeIdempotency, res.errCode(t))

	// A start that fails answers 202 "pending" (the action is kept, and the
	// reconciler starts it); a retry with the same key starts it too.
	e.ver.startErr = fmt.Errorf("temporal unavailable")
	idem2 := map[string]string{"Idempotency-Key": "k-2"}
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, header: idem2, body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, "pending", res.json(t)["verification"])
	require.Contains(t, e.logs.String(), "temporal unavailable")
	e.ver.startErr = nil
	n = len(e.ver.startCalls())
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, header: idem2, body: body})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Len(t, e.ver.startCalls(), n+1)
	retried := res.json(t)["id"].(string)
	require.Equal(t, tid+"/"+retried, e.ver.startCalls()[n])
	// …and once started, a further replay starts nothing.
	res = e.do(req{method: "POST", path: "/v1/actions", key: key, header: idem2, body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Len(t, e.ver.startCalls(), n+1)

	// A replay in another process (an empty start memory) of an action that
	// has a verdict starts nothing either.
	_, _, err := e.db.AppendVerdict(context.Background(), tid, commitlayer.Verdict{ActionID: id, Status: commitlayer.StatusPass,
		Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}, EvaluatedAt: e.now, SettlesAt: e.now})
	require.NoError(t, err)
	e2 := newEnv(t)
	res = e2.do(req{method: "POST", path: "/v1/actions", key: key, header: idem, body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, id, res.json(t)["id"])
	require.Empty(t, e2.ver.startCalls())
}

func TestActionsBadInput(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("actions-bad")
	e.contract(key, payoutContract)
	_, other := e.tenant("actions-bad-other")
	e.contract(other, anyContract)
	base := func() map[string]any {
		return map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}
	}
	with := func(k string, v any) map[string]any {
		m := base()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		body     any
		header   map[string]string
		want     int
		code     string
		contains string
	}{
		{"empty body", "", nil, http.StatusBadRequest, codeInvalidJSON, ""},
		{"malformed", `{"contract":`, nil, http.StatusBadRequest, codeInvalidJSON, ""},
		{"array", `[]`, nil, http.StatusBadRequest, codeInvalidRequest, ""},
		{"trailing", `{"contract":"send_payout","agent":"a","subject":"account:acc_1"} x`, nil, http.StatusBadRequest, codeInvalidJSON, ""},
		{"unknown field", with("colour", "blue"), nil, http.StatusBadRequest, codeInvalidRequest, "colour"},
		{"unknown claim field", with("claim", map[string]any{"status": "success", "mood": "ok"}), nil, http.StatusBadRequest, codeInvalidRequest, "mood"},
		{"agent wrong type", with("agent", 5), nil, http.StatusBadRequest, codeInvalidRequest, "agent"},
		{"params wrong type", with("params", "amount=5"), nil, http.StatusBadRequest, codeInvalidRequest, "params"},
		{"params array", with("params", []int{1}), nil, http.StatusBadRequest, codeInvalidRequest, "params"},
		{"trace not array", with("trace", map[string]any{"a": 1}), nil, http.StatusBadRequest, codeInvalidRequest, "trace"},
		{"contract_version wrong type", with("contract_version", "1"), nil, http.StatusBadRequest, codeInvalidRequest, "contract_version"},
		{"contract_version negative", with("contract_version", -1), nil, http.StatusBadRequest, codeInvalidRequest, "contract_version"},
		{"contract missing", with("contract", nil), nil, http.StatusBadRequest, codeInvalidRequest, "contract"},
		{"agent missing", with("agent", nil), nil, http.StatusBadRequest, codeInvalidRequest, "agent"},
		{"subject missing", with("subject", nil), nil, http.StatusBadRequest, codeInvalidRequest, "subject"},
		{"subject not type:id", with("subject", "acc_1"), nil, http.StatusBadRequest, codeInvalidRequest, "subject"},
		{"subject empty id", with("subject", "account:"), nil, http.StatusBadRequest, codeInvalidRequest, "subject"},
		{"id bad", with("id", "a b"), nil, http.StatusBadRequest, codeInvalidRequest, "id"},
		{"id too long", with("id", strings.Repeat("a", 129)), nil, http.StatusBadRequest, codeInvalidRequest, "id"},
		{"requested_at bad", with("requested_at", "yesterday"), nil, http.StatusBadRequest, codeInvalidRequest, "requested_at"},
		{"NUL in agent", with("agent", "a\u0000"), nil, http.StatusBadRequest, codeInvalidRequest, "agent"},
		{"NUL in params", with("params", map[string]any{"x": []any{"\u0000"}}), nil, http.StatusBadRequest, codeInvalidRequest, "params"},
		{"NUL in claim", with("claim", map[string]any{"status": "\u0000"}), nil, http.StatusBadRequest, codeInvalidRequest, "claim.status"},
		{"idempotency key too long", base(), map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, http.StatusBadRequest, codeInvalidRequest, "Idempotency-Key"},
		{"unknown contract", with("contract", "nope"), nil, http.StatusUnprocessableEntity, codeUnknownContract, "nope"},
		{"other tenant's contract", with("contract", "note_anything"), nil, http.StatusUnprocessableEntity, codeUnknownContract, ""},
		{"unknown version", with("contract_version", 9), nil, http.StatusUnprocessableEntity, codeUnknownContract, "version 9"},
		{"subject type mismatch", with("subject", "order:o_1"), nil, http.StatusUnprocessableEntity, codeSubjectMismatch, "account"},
		{"over limit", with("params", map[string]any{"pad": strings.Repeat("x", MaxBody)}), nil, http.StatusRequestEntityTooLarge, codeTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(req{method: "POST", path: "/v1/actions", key: key, header: tc.header, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t), "%s", res.Body)
			require.Contains(t, string(res.Body), tc.contains)
		})
	}
	require.Empty(t, e.ver.startCalls(), "no bad request started a verification")
}

func TestRecheck(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("recheck")
	e.contract(key, payoutContract)
	id := e.action(key, "account:acc_1", nil)

	e.ver.recheckWith = commitlayer.Verdict{Status: commitlayer.StatusPass,
		Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}, Version: 3,
		EvaluatedAt: e.now, SettlesAt: e.now.Add(10 * time.Minute)}
	res := e.do(req{method: "POST", path: "/v1/actions/" + id + "/recheck", key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct{ Verdict commitlayer.Verdict }
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Equal(t, id, got.Verdict.ActionID)
	require.Equal(t, 3, got.Verdict.Version)
	require.Equal(t, []string{tid + "/" + id}, e.ver.rechecks)
	require.Contains(t, string(res.Body), `"findings":[]`)

	// A failure within the watch: 503; after it: 409.
	e.ver.recheckErr = fmt.Errorf("workflow not found")
	res = e.do(req{method: "POST", path: "/v1/actions/" + id + "/recheck", key: key})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.Equal(t, codeUnavailable, res.errCode(t))
	require.NotContains(t, string(res.Body), "workflow not found")
	e.now = e.now.Add(2 * time.Hour)
	res = e.do(req{method: "POST", path: "/v1/actions/" + id + "/recheck", key: key})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeVerificationEnded, res.errCode(t))

	res = e.do(req{method: "POST", path: "/v1/actions/nope/recheck", key: key})
	require.Equal(t, http.StatusNotFound, res.Status)
}

func TestOrphans(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("orphans")
	_, other := e.tenant("orphans-other")
	e.contract(key, payoutContract)
	e.contract(other, payoutContract)
	at := e.now.Add(-time.Hour)
	res := e.do(req{method: "POST", path: "/v1/actions", key: key, body: map[string]any{
		"contract": "send_payout", "agent": "a", "subject": "account:acc_1", "requested_at": at.Format(time.RFC3339)}})
	require.Equal(t, http.StatusAccepted, res.Status)

	mk := func(id, subject string, occurred time.Time, typ string) map[string]any {
		return map[string]any{"source": "ledger", "type": typ, "subject": subject, "external_id": id,
			"occurred_at": occurred.Format(time.RFC3339), "attrs": map[string]any{"amount": 2500}}
	}
	res = e.do(req{method: "POST", path: "/v1/facts", key: key, body: map[string]any{"facts": []any{
		mk("p-1", "account:acc_1", at.Add(time.Minute), "payout_sent"),      // the action's effect
		mk("p-2", "account:acc_2", at.Add(2*time.Minute), "payout_sent"),    // no action: orphan
		mk("f-1", "account:acc_3", at.Add(3*time.Minute), "account_frozen"), // forbidden kind, no action: orphan
		mk("o-1", "account:acc_4", at.Add(4*time.Minute), "account_opened"), // not a kind of the contract
		mk("p-old", "account:acc_5", e.now.Add(-30*24*time.Hour), "payout_sent"),
	}}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	res = e.do(req{method: "GET", path: "/v1/actions/orphans?contract_id=send_payout", key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct {
		Orphans []struct {
			ContractID string           `json:"contract_id"`
			Check      string           `json:"check"`
			Fact       commitlayer.Fact `json:"fact"`
		}
		Since time.Time
	}
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Len(t, got.Orphans, 2, "%s", res.Body)
	require.Equal(t, "send_payout", got.Orphans[0].ContractID)
	require.Equal(t, "payout", got.Orphans[0].Check)
	require.Equal(t, "p-2", got.Orphans[0].Fact.ExternalID)
	require.Equal(t, "no_freeze", got.Orphans[1].Check)
	require.Equal(t, "f-1", got.Orphans[1].Fact.ExternalID)
	require.True(t, e.now.Add(-orphanWindow).Equal(got.Since))

	// since reaches back to the old payout.
	since := e.now.Add(-40 * 24 * time.Hour).Format(time.RFC3339)
	res = e.do(req{method: "GET", path: "/v1/actions/orphans?contract_id=send_payout&since=" + since, key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Len(t, got.Orphans, 3)
	require.Equal(t, "p-old", got.Orphans[0].Fact.ExternalID)

	// Another tenant with the same contract sees none of these facts.
	res = e.do(req{method: "GET", path: "/v1/actions/orphans?contract_id=send_payout", key: other})
	require.Equal(t, http.StatusOK, res.Status)
	require.Contains(t, string(res.Body), `"orphans":[]`)

	for _, tc := range []struct {
		query string
		want  int
		code  string
	}{
		{"", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=%00", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=send_payout&since=last-week", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=nope", http.StatusUnprocessableEntity, codeUnknownContract},
	} {
		res := e.do(req{method: "GET", path: "/v1/actions/orphans" + tc.query, key: key})
		require.Equal(t, tc.want, res.Status, "%s: %s", tc.query, res.Body)
		require.Equal(t, tc.code, res.errCode(t), tc.query)
	}
}

func TestAdminTenants(t *testing.T) {
	e := newEnv(t)
	id, key := e.tenant("  Acme Support  ")
	require.NotEmpty(t, key)
	res := e.do(req{method: "GET", path: "/v1/admin/tenants", key: adminKey})
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
	res = e.do(req{method: "GET", path: "/v1/contracts", key: key})
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
			res := e.do(req{method: "POST", path: "/v1/admin/tenants", key: adminKey, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t))
		})
	}
}

func TestAdminBenchmark(t *testing.T) {
	e := newEnv(t)
	res := e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: map[string]any{"only": []string{"refund/"}, "concurrency": 4}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	m := res.json(t)
	id := m["id"].(string)
	require.Equal(t, "running", m["status"])
	require.Equal(t, "/v1/admin/benchmark/"+id, res.Header.Get("Location"))
	require.Equal(t, []BenchmarkRequest{{Only: []string{"refund/"}, Concurrency: 4}}, e.bench.reqs)

	// The runner finishes it; the run shows everything.
	run, err := e.db.GetBenchmarkRun(context.Background(), id)
	require.NoError(t, err)
	run.Status, run.Summary, run.Results = "done", json.RawMessage(`{"scenarios":2}`), json.RawMessage(`[{"id":"refund/ok"}]`)
	run.Markdown, run.LogTail, run.FinishedAt = "| a | b |", "done\n", e.now
	require.NoError(t, e.db.UpdateBenchmarkRun(context.Background(), run))

	res = e.do(req{method: "GET", path: "/v1/admin/benchmark/" + id, key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	m = res.json(t)
	require.Equal(t, "done", m["status"])
	require.Equal(t, map[string]any{"scenarios": float64(2)}, m["summary"])
	require.Equal(t, []any{map[string]any{"id": "refund/ok"}}, m["results"])
	require.Equal(t, "| a | b |", m["markdown"])
	require.Equal(t, "done\n", m["log_tail"])
	require.Equal(t, map[string]any{"only": []any{"refund/"}, "concurrency": float64(4)}, m["request"])
	require.NotNil(t, m["finished_at"])

	res = e.do(req{method: "GET", path: "/v1/admin/benchmark", key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct{ Runs []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &list))
	var mine map[string]any
	for _, r := range list.Runs {
		if r["id"] == id {
			mine = r
		}
	}
	require.NotNil(t, mine)
	require.NotContains(t, mine, "results", "the list leaves out the per-scenario rows")

	res = e.do(req{method: "GET", path: "/v1/admin/benchmark/bench_nope", key: adminKey})
	require.Equal(t, http.StatusNotFound, res.Status)

	// Purging a finished run deletes the tenants it made, not others.
	ctx := context.Background()
	for _, sc := range []string{"refund/a", "refund/b"} {
		_, _, err := e.db.CreateBenchmarkTenant(ctx, id, sc)
		require.NoError(t, err)
	}
	bystander, _, err := e.db.CreateTenant(ctx, "benchmark bystander")
	require.NoError(t, err)
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/" + id + "/tenants", key: adminKey})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"id": id, "purged_tenants": float64(2)}, res.json(t))
	tenants, err := e.db.ListTenants(ctx)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, tn := range tenants {
		names[tn.ID] = true
	}
	require.True(t, names[bystander.ID])
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/bench_nope/tenants", key: adminKey})
	require.Equal(t, http.StatusNotFound, res.Status)
	_, tenantKey := e.tenant("purger")
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/" + id + "/tenants", key: tenantKey})
	require.Equal(t, http.StatusForbidden, res.Status)

	for _, tc := range []struct {
		name string
		body any
		want int
		code string
	}{
		{"malformed", `{`, http.StatusBadRequest, codeInvalidJSON},
		{"unknown field", `{"provider":"x"}`, http.StatusBadRequest, codeInvalidRequest},
		{"only wrong type", `{"only":"refund/"}`, http.StatusBadRequest, codeInvalidRequest},
		{"only blank", `{"only":[" "]}`, http.StatusBadRequest, codeInvalidRequest},
		{"concurrency negative", `{"concurrency":-1}`, http.StatusBadRequest, codeInvalidRequest},
		{"concurrency huge", `{"concurrency":1000}`, http.StatusBadRequest, codeInvalidRequest},
		{"payments wrong type", `{"payments":5}`, http.StatusBadRequest, codeInvalidRequest},
		{"payments not a name", map[string]string{"payments": strings.Repeat("p", 51)}, http.StatusBadRequest, codeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.errCode(t))
		})
	}

	// A running run is not purged.
	res = e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: `{}`})
	require.Equal(t, http.StatusAccepted, res.Status)
	res = e.do(req{method: "DELETE", path: "/v1/admin/benchmark/" + res.json(t)["id"].(string) + "/tenants", key: adminKey})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, codeBenchmarkRunning, res.errCode(t))

	// The runner refuses a request it cannot run: 422.
	e.bench.err = fmt.Errorf("start: %w", &commitlayer.FieldError{Field: "only[0]", Reason: "matches no scenario"})
	res = e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: `{"only":["zzz/"]}`})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status)
	require.Equal(t, codeInvalidBenchmark, res.errCode(t))

	// Without a runner: 503, and runs are still listed.
	e2 := newEnv(t, func(c *Config) { c.Benchmarks = nil })
	res = e2.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: `{}`})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	res = e2.do(req{method: "GET", path: "/v1/admin/benchmark", key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
}

// TestInternalErrors fails the store under each route: 500 with the generic
// message, the detail only in the log, next to the request id.
func TestInternalErrors(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("internal")
	e.contract(key, payoutContract)
	id := e.action(key, "account:acc_1", nil)
	run, err := e.db.CreateBenchmarkRun(context.Background(), commitlayer.BenchmarkRun{Status: "running"})
	require.NoError(t, err)
	_ = tid

	for _, tc := range []struct {
		fail   string
		method string
		path   string
		key    string
		body   any
	}{
		{"TenantByAPIKey", "GET", "/v1/contracts", key, nil},
		{"TenantByAPIKey", "GET", "/v1/admin/tenants", "cl_not_admin", nil},
		{"PutContract", "POST", "/v1/contracts", key, payoutContract},
		{"ListContracts", "GET", "/v1/contracts", key, nil},
		{"GetContract", "GET", "/v1/contracts/send_payout", key, nil},
		{"InsertFacts", "POST", "/v1/facts", key, map[string]any{"facts": []any{fact(1, "account:acc_1")}}},
		{"CreateConnector", "POST", "/v1/connectors", key, map[string]string{"source": "crm", "kind": "http_events", "url": "http://x"}},
		{"ListConnectors", "GET", "/v1/connectors", key, nil},
		{"Sources", "GET", "/v1/sources", key, nil},
		{"GetContract", "POST", "/v1/actions", key, map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_2"}},
		{"CreateAction", "POST", "/v1/actions", key, map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_2"}},
		{"GetAction", "GET", "/v1/actions/" + id, key, nil},
		{"VerdictHistory", "GET", "/v1/actions/" + id, key, nil},
		{"GetAction", "POST", "/v1/actions/" + id + "/recheck", key, nil},
		{"FactsOfKinds", "GET", "/v1/actions/orphans?contract_id=send_payout", key, nil},
		{"ActionsOfContract", "GET", "/v1/actions/orphans?contract_id=send_payout", key, nil},
		{"CreateTenant", "POST", "/v1/admin/tenants", adminKey, map[string]string{"name": "x"}},
		{"ListTenants", "GET", "/v1/admin/tenants", adminKey, nil},
		{"ListBenchmarkRuns", "GET", "/v1/admin/benchmark", adminKey, nil},
		{"GetBenchmarkRun", "GET", "/v1/admin/benchmark/" + run.ID, adminKey, nil},
	} {
		t.Run(tc.fail+" "+tc.method+" "+tc.path, func(t *testing.T) {
			fe := newEnv(t, withStore(failingStore{Store: e.db, method: tc.fail}))
			res := fe.do(req{method: tc.method, path: tc.path, key: tc.key, body: tc.body})
			require.Equal(t, http.StatusInternalServerError, res.Status, "%s", res.Body)
			require.JSONEq(t, `{"error":{"code":"internal","message":"internal error"}}`, string(res.Body))
			logs := fe.logs.String()
			require.Contains(t, logs, "secret detail")
			require.Contains(t, logs, res.Header.Get("X-Request-Id"))
		})
	}
}

// panicVerifier panics on Start.
type panicVerifier struct{ fakeVerifier }

func (p *panicVerifier) Start(context.Context, string, commitlayer.ActionRecord) error {
	panic("verifier exploded")
}

func TestPanicIsRecovered(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Verifier = &panicVerifier{} })
	_, key := e.tenant("panic")
	e.contract(key, payoutContract)
	res := e.do(req{method: "POST", path: "/v1/actions", key: key, body: map[string]any{
		"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusInternalServerError, res.Status)
	require.JSONEq(t, `{"error":{"code":"internal","message":"internal error"}}`, string(res.Body))
	require.Contains(t, e.logs.String(), "verifier exploded")
	require.Contains(t, e.logs.String(), res.Header.Get("X-Request-Id"))
	require.Contains(t, metricsText(t, e), `commitlayer_http_requests_total{code="500",route="POST /v1/actions"} 1`)
}

func metricsText(t *testing.T, e *env) string {
	t.Helper()
	res := e.do(req{method: "GET", path: "/metrics"})
	require.Equal(t, http.StatusOK, res.Status)
	return string(res.Body)
}

func TestHealthz(t *testing.T) {
	e := newEnv(t)
	res := e.do(req{method: "GET", path: "/healthz"})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"status":"ok"}`, string(res.Body))

	fe := newEnv(t, withStore(failingStore{Store: e.db, method: "TenantByAPIKey"}))
	res = fe.do(req{method: "GET", path: "/healthz"})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.Equal(t, codeUnavailable, res.errCode(t))
	require.NotContains(t, string(res.Body), "secret detail")
	require.Contains(t, fe.logs.String(), "secret detail")
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "someone_elses_total", Help: "registered by the worker"})
	e.reg.MustRegister(other)
	other.Add(7)
	_, key := e.tenant("metrics")
	e.contract(key, payoutContract)
	e.action(key, "account:acc_1", map[string]string{"Idempotency-Key": "m"})
	e.action(key, "account:acc_1", map[string]string{"Idempotency-Key": "m"})
	e.do(req{method: "POST", path: "/v1/facts", key: key, body: map[string]any{"facts": []any{fact(1, "account:acc_1"), fact(2, "account:acc_1")}}})
	e.do(req{method: "POST", path: "/v1/facts", key: key, body: map[string]any{"facts": []any{fact(1, "account:acc_1")}}})
	e.do(req{method: "GET", path: "/v1/actions/nope", key: key})
	e.do(req{method: "GET", path: "/nowhere"})

	text := metricsText(t, e)
	for _, want := range []string{
		`commitlayer_http_requests_total{code="201",route="POST /v1/admin/tenants"} 1`,
		`commitlayer_http_requests_total{code="202",route="POST /v1/actions"} 2`,
		`commitlayer_http_requests_total{code="404",route="GET /v1/actions/{id}"} 1`,
		`commitlayer_http_requests_total{code="404",route="unmatched"} 1`,
		`commitlayer_http_request_duration_seconds_count{code="200",route="POST /v1/facts"} 2`,
		`commitlayer_facts_ingested_total{result="inserted"} 2`,
		`commitlayer_facts_ingested_total{result="duplicate"} 1`,
		`commitlayer_actions_recorded_total{result="created"} 1`,
		`commitlayer_actions_recorded_total{result="replayed"} 1`,
		`someone_elses_total 7`,
	} {
		require.Contains(t, text, want)
	}

	// Two servers on one registry share the metrics instead of failing.
	require.NotPanics(t, func() { New(Config{Store: e.db, Verifier: e.ver, Registry: e.reg}) })
}

func TestUnmatchedRoutes(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		method, path string
		want         int
		allow        string
	}{
		{"GET", "/nowhere", http.StatusNotFound, ""},
		{"GET", "/v1", http.StatusNotFound, ""},
		{"GET", "/v1/facts", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/v1/contracts", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
		{"PUT", "/v1/actions/abc", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/v1/admin/tenants", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
	} {
		res := e.do(req{method: tc.method, path: tc.path})
		require.Equal(t, tc.want, res.Status, "%s %s", tc.method, tc.path)
		require.Contains(t, []string{codeNotFound, codeMethodNotAllowed}, res.errCode(t))
		require.Equal(t, tc.allow, res.Header.Get("Allow"))
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t)
	res := e.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": "abc-123"}})
	require.Equal(t, "abc-123", res.Header.Get("X-Request-Id"))
	res = e.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": "bad id\n"}})
	require.NotEqual(t, "bad id\n", res.Header.Get("X-Request-Id"))
	require.Len(t, res.Header.Get("X-Request-Id"), 24)
	a := e.do(req{method: "GET", path: "/healthz"}).Header.Get("X-Request-Id")
	b := e.do(req{method: "GET", path: "/healthz"}).Header.Get("X-Request-Id")
	require.NotEqual(t, a, b)
}

func TestOpenAPIDocument(t *testing.T) {
	d := openAPIDoc(t)
	require.Regexp(t, `^3\.[01]\.\d+$`, d["openapi"])
	require.NotEmpty(t, dig(d, "info", "title"))
	require.NotEmpty(t, dig(d, "info", "version"))
	require.NotNil(t, dig(d, "components", "schemas", "Error"))
	paths, ok := d["paths"].(map[string]any)
	require.True(t, ok)

	e := newEnv(t)
	registered := map[string]bool{}
	for _, rt := range e.srv.Routes() {
		registered[rt.Pattern()] = true
		op := dig(paths, rt.Path, strings.ToLower(rt.Method))
		require.NotNil(t, op, "route %s is missing from openapi.json", rt.Pattern())
		if rt.auth != authNone {
			for _, code := range []string{"401", "500"} {
				require.NotNil(t, dig(op, "responses", code), "%s documents no %s", rt.Pattern(), code)
			}
		}
		if rt.auth == authAdmin {
			require.NotNil(t, dig(op, "responses", "403"), "%s documents no 403", rt.Pattern())
		}
	}
	for path, item := range paths {
		for method := range item.(map[string]any) {
			p := strings.ToUpper(method) + " " + path
			require.True(t, registered[p], "openapi.json documents %s, which is not a route", p)
		}
	}
	// Every $ref resolves.
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				require.NotPanics(t, func() { resolve(d, ref) }, ref)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(d)

	res := e.do(req{method: "GET", path: "/openapi.json"})
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, OpenAPI, res.Body)
}

// TestServedOverHTTP runs one request through a real listener, as a client
// would see it.
func TestServedOverHTTP(t *testing.T) {
	e := newEnv(t)
	ts := newServer(t, e)
	resp, err := http.Get(ts + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status":"ok"}`, string(body))
}

func TestWithoutVerifier(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Verifier = nil })
	_, key := e.tenant("no-verifier")
	e.contract(key, payoutContract)
	res := e.do(req{method: "POST", path: "/v1/actions", key: key, header: map[string]string{"Idempotency-Key": "nv"},
		body: map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "pending", res.json(t)["verification"], "kept; a reconciler starts it")
	require.Contains(t, e.logs.String(), "no verifier configured")
	res = e.do(req{method: "POST", path: "/v1/facts", key: key, body: map[string]any{"facts": []any{fact(1, "account:acc_1")}}})
	require.Equal(t, http.StatusOK, res.Status)
	// The action was kept; with a verifier, the retry starts it.
	e2 := newEnv(t)
	res = e2.do(req{method: "POST", path: "/v1/actions", key: key, header: map[string]string{"Idempotency-Key": "nv"},
		body: map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Len(t, e2.ver.startCalls(), 1)
	id := res.json(t)["id"].(string)
	res = e.do(req{method: "POST", path: "/v1/actions/" + id + "/recheck", key: key})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
}
