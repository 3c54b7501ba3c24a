package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/service"
)

// hostileRequest is one entry of testdata/hostile/requests.json.
type hostileRequest struct {
	Name    string `json:"name"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Auth    string `json:"auth"`
	Body    string `json:"body"`
	BodyHex string `json:"body_hex"`
	Want    int    `json:"want"`
}

func (h hostileRequest) body(t testing.TB) []byte {
	if h.BodyHex != "" {
		b, err := hex.DecodeString(h.BodyHex)
		require.NoError(t, err, h.Name)
		return b
	}
	return []byte(h.Body)
}

func hostileCorpus(t testing.TB) []hostileRequest {
	t.Helper()
	b, err := os.ReadFile("testdata/hostile/requests.json")
	require.NoError(t, err)
	var out []hostileRequest
	require.NoError(t, json.Unmarshal(b, &out))
	require.NotEmpty(t, out)
	return out
}

// requireClientAnswer checks an answer to hostile input: never a 5xx but
// 503 (a dependency away), an error in the documented shape, and no echo
// of more than a bounded part of the input.
func requireClientAnswer(t testing.TB, name string, status int, body []byte) {
	t.Helper()
	require.True(t, status < 500 || status == http.StatusServiceUnavailable, "%s: %d %s", name, status, body)
	if status < 400 {
		return
	}
	var e client.ErrorBody
	require.NoError(t, json.Unmarshal(body, &e), "%s: error body %s", name, body)
	require.NotEmpty(t, e.Error.Code, "%s: %s", name, body)
	require.NotEmpty(t, e.Error.Message, "%s: %s", name, body)
	require.Less(t, len(body), 4096, "%s: the answer echoes the input", name)
}

// TestHostileCorpus sends the corpus through the whole handler on the real
// store, with the production address rules and a secrets key: each entry
// gets its status, in the error shape the OpenAPI document gives.
func TestHostileCorpus(t *testing.T) {
	guard := netguard.New(netguard.Options{Lookup: testLookup})
	e := newEnv(t, func(c *Config) { c.Secrets, c.Guard = testBox(t), guard })
	_, key := e.tenant("hostile")
	e.contract(key, payoutContract)
	for _, h := range hostileCorpus(t) {
		t.Run(h.Name, func(t *testing.T) {
			k := map[string]string{"tenant": key, "admin": adminKey, "none": ""}[h.Auth]
			var body any
			if b := h.body(t); len(b) > 0 || h.Method == "POST" {
				body = b
			}
			res := e.do(apitest.Request{Method: h.Method, Path: h.Path, Key: k, Body: body})
			require.Equal(t, h.Want, res.Status, "%s", res.Body)
			requireClientAnswer(t, h.Name, res.Status, res.Body)
		})
	}
	require.Empty(t, e.ver.startCalls(), "no hostile action reached Temporal")
}

// FuzzEveryRoute sends arbitrary methods, paths, queries and bodies to
// every route (the seeds: each route with an empty object, and the hostile
// corpus) through the whole handler on the real store: the API never
// answers 5xx (but 503), never panics, and answers errors in their shape.
func FuzzEveryRoute(f *testing.F) {
	d := db(f)
	ctx := context.Background()
	srv := New(Config{Store: d, Actions: service.NewActions(d, service.NewContracts(d, 0), &fakeVerifier{}, nil, nil), TemporalHealth: func(context.Context) error { return nil }, AdminKey: adminKey,
		Guard: netguard.New(netguard.Options{Lookup: testLookup}), Secrets: testBox(f)})
	h := srv.Handler()
	_, key, err := d.CreateTenant(ctx, "fuzz-routes")
	require.NoError(f, err)
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/contracts", strings.NewReader(payoutContract))
	r.Header.Set("Authorization", "Bearer "+key)
	r.Header.Set("Content-Type", "application/yaml")
	h.ServeHTTP(rec, r)
	require.Contains(f, []int{200, 201}, rec.Code, rec.Body.String())

	for _, rt := range srv.Routes() {
		f.Add(rt.Method, fillPath(rt.Path), "tenant", []byte(`{}`))
		f.Add(rt.Method, fillPath(rt.Path)+"?wait=final&timeout=0.1&limit=-1&since=x", "admin", []byte(`[]`))
	}
	for _, hr := range hostileCorpus(f) {
		f.Add(hr.Method, hr.Path, hr.Auth, hr.body(f))
	}
	f.Fuzz(func(t *testing.T, method, target, auth string, body []byte) {
		if strings.Contains(target, "wait=") {
			return // a wait holds the request for its timeout: not what this looks for
		}
		r, err := http.NewRequestWithContext(ctx, method, "http://api.test"+target, strings.NewReader(string(body)))
		if err != nil || !strings.HasPrefix(target, "/") {
			return // not a request a client can send
		}
		switch auth {
		case "tenant":
			r.Header.Set("Authorization", "Bearer "+key)
		case "admin":
			r.Header.Set("Authorization", "Bearer "+adminKey)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if strings.HasPrefix(target, "/v1/traces") {
			// OTLP/HTTP answers its errors as google.rpc.Status, not in
			// the API's error shape (otlpingest's tests check it).
			require.True(t, rec.Code < 500 || rec.Code == http.StatusServiceUnavailable, "%s %s: %d", method, target, rec.Code)
			return
		}
		requireClientAnswer(t, method+" "+target, rec.Code, rec.Body.Bytes())
	})
}
