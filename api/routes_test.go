package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
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
				res := e.do(apitest.Request{Method: rt.Method, Path: path, Key: tc.key, Header: tc.header, Body: `{"name":"intruder"}`})
				require.Equal(t, tc.want, res.Status, "%s: %s", tc.name, res.Body)
				switch {
				case rt.Path == "/v1/traces":
					// OTLP's refusal: a google.rpc.Status (JSON here: the
					// body names no OTLP encoding), UNAUTHENTICATED.
					require.Equal(t, http.StatusUnauthorized, tc.want)
					m := res.JSON(t)
					require.Equal(t, 16.0, m["code"], tc.name)
					require.NotEmpty(t, m["message"], tc.name)
					require.NotEmpty(t, res.Header.Get("WWW-Authenticate"))
				case tc.want == http.StatusUnauthorized:
					require.Equal(t, codeUnauthorized, res.ErrCode(t), tc.name)
					require.NotEmpty(t, res.Header.Get("WWW-Authenticate"))
				default:
					require.Equal(t, codeForbidden, res.ErrCode(t), tc.name)
				}
			}
		})
	}
	// Nothing got through: no tenant was created by a refused request (the
	// database is shared with other packages' tests, which may create
	// tenants of their own meanwhile: count the intruder's only).
	tenantsAfter, err := e.db.ListTenants(ctx)
	require.NoError(t, err)
	require.Equal(t, intruders(tenantsBefore), intruders(tenantsAfter))
}

// TestInternalErrors fails the store under each route: 500 with the generic
// message, the detail only in the log, next to the request id.
func TestInternalErrors(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("internal")
	e.contract(key, payoutContract)
	id := e.action(key, "account:acc_1", nil)
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
	} {
		t.Run(tc.fail+" "+tc.method+" "+tc.path, func(t *testing.T) {
			fe := newEnv(t, withStore(failingStore{Store: e.db, method: tc.fail}))
			res := fe.do(apitest.Request{Method: tc.method, Path: tc.path, Key: tc.key, Body: tc.body})
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
	e := newEnv(t, withVerifier(&panicVerifier{}))
	_, key := e.tenant("panic")
	e.contract(key, payoutContract)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusInternalServerError, res.Status)
	require.JSONEq(t, `{"error":{"code":"internal","message":"internal error"}}`, string(res.Body))
	require.Contains(t, e.logs.String(), "verifier exploded")
	require.Contains(t, e.logs.String(), res.Header.Get("X-Request-Id"))
	require.Contains(t, metricsText(t, e), `commitlayer_http_requests_total{code="500",route="POST /v1/actions"} 1`)
}

func metricsText(t *testing.T, e *env) string {
	t.Helper()
	res := e.do(apitest.Request{Method: "GET", Path: "/metrics"})
	require.Equal(t, http.StatusOK, res.Status)
	return string(res.Body)
}

// TestHealthzAndReadyz: /healthz is liveness (the process serves, whatever
// its dependencies); /readyz answers 503 naming the database or Temporal
// when either does not answer, the detail only in the log.
func TestHealthzAndReadyz(t *testing.T) {
	e := newEnv(t)
	res := e.do(apitest.Request{Method: "GET", Path: "/healthz"})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"status":"ok"}`, string(res.Body))
	res = e.do(apitest.Request{Method: "GET", Path: "/readyz"})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"status":"ok","database":"ok","temporal":"ok"}`, string(res.Body))

	fe := newEnv(t, withStore(failingStore{Store: e.db, method: "TenantByAPIKey"}))
	res = fe.do(apitest.Request{Method: "GET", Path: "/healthz"})
	require.Equal(t, http.StatusOK, res.Status, "liveness does not depend on the database")
	res = fe.do(apitest.Request{Method: "GET", Path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	require.JSONEq(t, `{"status":"unavailable","database":"unavailable","temporal":"ok"}`, string(res.Body))
	require.NotContains(t, string(res.Body), "secret detail")
	require.Contains(t, fe.logs.String(), "secret detail")

	te := newEnv(t, func(c *Config) { c.TemporalHealth = func(context.Context) error { return errors.New("frontend gone") } })
	res = te.do(apitest.Request{Method: "GET", Path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.JSONEq(t, `{"status":"unavailable","database":"ok","temporal":"unavailable"}`, string(res.Body))
	require.Contains(t, te.logs.String(), "frontend gone")

	ne := newEnv(t, func(c *Config) { c.TemporalHealth = nil })
	res = ne.do(apitest.Request{Method: "GET", Path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.Equal(t, "not configured", res.JSON(t)["temporal"])
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
	e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{fact(1, "account:acc_1"), fact(2, "account:acc_1")}}})
	e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{fact(1, "account:acc_1")}}})
	e.do(apitest.Request{Method: "GET", Path: "/v1/actions/nope", Key: key})
	e.do(apitest.Request{Method: "GET", Path: "/nowhere"})

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
	require.NotPanics(t, func() { New(Config{Store: e.db, Registry: e.reg}) })
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
		res := e.do(apitest.Request{Method: tc.method, Path: tc.path})
		require.Equal(t, tc.want, res.Status, "%s %s", tc.method, tc.path)
		require.Contains(t, []string{codeNotFound, codeMethodNotAllowed}, res.ErrCode(t))
		require.Equal(t, tc.allow, res.Header.Get("Allow"))
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t)
	res := e.do(apitest.Request{Method: "GET", Path: "/healthz", Header: map[string]string{"X-Request-Id": "abc-123"}})
	require.Equal(t, "abc-123", res.Header.Get("X-Request-Id"))
	res = e.do(apitest.Request{Method: "GET", Path: "/healthz", Header: map[string]string{"X-Request-Id": "bad id\n"}})
	require.NotEqual(t, "bad id\n", res.Header.Get("X-Request-Id"))
	require.Len(t, res.Header.Get("X-Request-Id"), 24)
	a := e.do(apitest.Request{Method: "GET", Path: "/healthz"}).Header.Get("X-Request-Id")
	b := e.do(apitest.Request{Method: "GET", Path: "/healthz"}).Header.Get("X-Request-Id")
	require.NotEqual(t, a, b)
}

func TestOpenAPIDocument(t *testing.T) {
	d := openAPISpec(t) // loads and validates the document: every $ref resolves
	require.Regexp(t, `^3\.[01]\.\d+$`, d.OpenAPI)
	require.NotEmpty(t, d.Info.Title)
	require.NotEmpty(t, d.Info.Version)
	require.NotNil(t, d.Components.Schemas["Error"])

	e := newEnv(t)
	registered := map[string]bool{}
	for _, rt := range e.srv.Routes() {
		registered[rt.Pattern()] = true
		var op *openapi3.Operation
		if item := d.Paths.Value(rt.Path); item != nil {
			op = item.GetOperation(rt.Method)
		}
		require.NotNil(t, op, "route %s is missing from openapi.json", rt.Pattern())
		if rt.auth != authNone {
			for _, code := range []int{http.StatusUnauthorized, http.StatusInternalServerError} {
				require.NotNil(t, op.Responses.Status(code), "%s documents no %d", rt.Pattern(), code)
			}
		}
		if rt.auth == authAdmin {
			require.NotNil(t, op.Responses.Status(http.StatusForbidden), "%s documents no 403", rt.Pattern())
		}
	}
	for path, item := range d.Paths.Map() {
		for method := range item.Operations() {
			p := method + " " + path
			require.True(t, registered[p], "openapi.json documents %s, which is not a route", p)
		}
	}

	res := e.do(apitest.Request{Method: "GET", Path: "/openapi.json"})
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
	checkAgainstDoc(t, resp.Request, "GET /healthz", apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body})
	require.JSONEq(t, `{"status":"ok"}`, string(body))
}

func TestWithoutVerifier(t *testing.T) {
	e := newEnv(t, withVerifier(nil))
	_, key := e.tenant("no-verifier")
	e.contract(key, payoutContract)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: map[string]string{"Idempotency-Key": "nv"},
		Body: map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "pending", res.JSON(t)["verification"], "kept; a reconciler starts it")
	require.Contains(t, e.logs.String(), "no verifier configured")
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{fact(1, "account:acc_1")}}})
	require.Equal(t, http.StatusOK, res.Status)
	// The action was kept; with a verifier, the retry starts it.
	e2 := newEnv(t)
	res = e2.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: map[string]string{"Idempotency-Key": "nv"},
		Body: map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Len(t, e2.ver.startCalls(), 1)
	id := res.JSON(t)["id"].(string)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions/" + id + "/recheck", Key: key})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
}

// TestMetricsModes: /metrics behind the admin key, or left to an address
// of its own.
func TestMetricsModes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Metrics = MetricsAdmin })
	_, key := e.tenant("metrics-admin")
	require.Equal(t, http.StatusUnauthorized, e.do(apitest.Request{Method: "GET", Path: "/metrics"}).Status)
	require.Equal(t, http.StatusForbidden, e.do(apitest.Request{Method: "GET", Path: "/metrics", Key: key}).Status)
	res := e.do(apitest.Request{Method: "GET", Path: "/metrics", Key: adminKey})
	require.Equal(t, http.StatusOK, res.Status)
	require.Contains(t, string(res.Body), "commitlayer_")

	off := newEnv(t, func(c *Config) { c.Metrics = MetricsOff })
	require.Equal(t, http.StatusNotFound, off.do(apitest.Request{Method: "GET", Path: "/metrics", Key: adminKey}).Status)
}

// intruders counts the tenants named as TestAuth's refused requests name
// theirs.
func intruders(ts []commitlayer.Tenant) int {
	n := 0
	for _, t := range ts {
		if t.Name == "intruder" {
			n++
		}
	}
	return n
}
