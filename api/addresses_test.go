package api

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/connectors/pull"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// testResolver is the DNS the address tests see.
var testResolver = map[string][]string{
	"public.example":   {"93.184.216.34"},
	"localhost":        {"127.0.0.1", "::1"},
	"internal.example": {"10.0.0.5"},
	"mixed.example":    {"93.184.216.34", "127.0.0.1"},
	"mapped.example":   {"::ffff:127.0.0.1"},
}

func testLookup(_ context.Context, host string) ([]netip.Addr, error) {
	ss, ok := testResolver[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out, nil
}

func testBox(t testing.TB) *secrets.Box {
	t.Helper()
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	return box
}

// internalForms reads the corpus of internal hosts (netguard's testdata).
func internalForms(t *testing.T) (hosts []string, metadata map[string]bool) {
	t.Helper()
	f, err := os.Open("../internal/netguard/testdata/internal_hosts.txt")
	require.NoError(t, err)
	defer f.Close()
	metadata = map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		h, tag, _ := strings.Cut(line, " ")
		hosts = append(hosts, h)
		metadata[h] = tag == "metadata"
	}
	return hosts, metadata
}

const jsonMapping = `"items":"/data","next":"/next","type":"refund_created","subject":"/order","subject_type":"order","external_id":"/id","occurred_at":"/at"`

// registrations are the bodies registering host with each kind (and a
// webhook): every URL, host and DSN a tenant gives.
func registrations(host string, i int) map[string]any {
	return map[string]any{
		"http_events": map[string]any{"source": fmt.Sprintf("ev%d", i), "kind": "http_events", "url": "http://" + host + "/feed"},
		"http_json": map[string]any{"source": fmt.Sprintf("js%d", i), "kind": "http_json",
			"config": json.RawMessage(`{"url":"http://` + host + `/latest/meta-data/",` + jsonMapping + `}`)},
		"postgres": map[string]any{"source": fmt.Sprintf("pg%d", i), "kind": "postgres",
			"config": json.RawMessage(`{"dsn":"postgres://reader@` + host + `:5432/shop","queries":[{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","cursor":"id","subject":"s","occurred_at":"at"}]}`)},
		"stripe": map[string]any{"source": fmt.Sprintf("st%d", i), "kind": "stripe", "url": "http://" + host + "/",
			"api_key": "rk_test_" + strings.Repeat("a", 24)},
		"webhook": map[string]any{"url": "http://" + host + "/hook", "events": []string{"verdict.final"}},
	}
}

// TestOneAddressRuleForEveryKind: every internal form of the corpus is
// refused at registration (422 address_not_allowed, naming the field and
// no address) for every connector kind and for webhooks; a public host is
// accepted by each. On HEAD http_json config.url took 38 of 42 forms and
// postgres dsn all of them.
func TestOneAddressRuleForEveryKind(t *testing.T) {
	guard := netguard.New(netguard.Options{Lookup: testLookup})
	e := newEnv(t, func(c *Config) { c.Secrets, c.Guard = testBox(t), guard })
	_, key := e.tenant("addresses")
	hosts, _ := internalForms(t)
	require.GreaterOrEqual(t, len(hosts), 42)
	wantField := map[string]string{"http_events": "url: ", "http_json": "config.url: ", "postgres": "config.dsn: ",
		"stripe": "url: ", "webhook": "url: "}
	for i, host := range hosts {
		for kind, body := range registrations(host, i) {
			path := "/v1/connectors"
			if kind == "webhook" {
				path = "/v1/webhooks"
			}
			res := e.do(apitest.Request{Method: "POST", Path: path, Key: key, Body: body})
			require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s %s: %s", kind, host, res.Body)
			require.Equal(t, codeAddressNotAllowed, res.ErrCode(t), "%s %s", kind, host)
			require.True(t, strings.HasPrefix(res.ErrMessage(t), wantField[kind]), "%s %s: %s", kind, host, res.Body)
			require.NotContains(t, res.ErrMessage(t), "10.0.0.5", "the answer names no resolved address")
		}
	}
	for kind, body := range registrations("public.example", 999) {
		path := "/v1/connectors"
		if kind == "webhook" {
			path = "/v1/webhooks"
		}
		res := e.do(apitest.Request{Method: "POST", Path: path, Key: key, Body: body})
		require.Equal(t, http.StatusCreated, res.Status, "%s public: %s", kind, res.Body)
	}

	// Unix sockets and DSNs left to the server's defaults.
	for _, dsn := range []string{
		"host=/var/run/postgresql dbname=shop user=reader",
		"postgres://reader@/shop?host=/tmp",
	} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: map[string]any{"source": "sock", "kind": "postgres",
			"config": map[string]any{"dsn": dsn, "queries": []any{map[string]any{"type": "t", "sql": "SELECT 1 WHERE $1 IS NULL", "cursor": "id", "subject": "s", "occurred_at": "at"}}}}})
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s: %s", dsn, res.Body)
		require.Equal(t, "config.dsn: address not allowed", res.ErrMessage(t), dsn)
	}
	for _, dsn := range []string{"dbname=shop user=reader", "postgres:///shop", "host=public.example passfile=/root/.pgpass dbname=shop"} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: map[string]any{"source": "nohost", "kind": "postgres",
			"config": map[string]any{"dsn": dsn, "queries": []any{map[string]any{"type": "t", "sql": "SELECT 1 WHERE $1 IS NULL", "cursor": "id", "subject": "s", "occurred_at": "at"}}}}})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", dsn, res.Body)
		require.Contains(t, res.ErrMessage(t), "dsn: ", dsn)
	}
}

// TestPrivateAddressesAllowedWhenAsked: with
// COMMITLAYER_ALLOW_PRIVATE_ADDRESSES=1 (the sandbox's loopback feeds) the
// private forms are accepted by every kind; the metadata endpoints and Unix
// sockets stay refused.
func TestPrivateAddressesAllowedWhenAsked(t *testing.T) {
	guard := netguard.New(netguard.Options{AllowPrivate: true, Lookup: testLookup})
	e := newEnv(t, func(c *Config) { c.Secrets, c.Guard = testBox(t), guard })
	_, key := e.tenant("addresses-open")
	_, metadata := internalForms(t)
	for i, host := range []string{"127.0.0.1", "[::1]", "localhost", "10.0.0.1", "internal.example"} {
		for kind, body := range registrations(host, i) {
			path := "/v1/connectors"
			if kind == "webhook" {
				path = "/v1/webhooks"
			}
			res := e.do(apitest.Request{Method: "POST", Path: path, Key: key, Body: body})
			require.Equal(t, http.StatusCreated, res.Status, "%s %s: %s", kind, host, res.Body)
		}
	}
	i := 100
	for host, md := range metadata {
		if !md {
			continue
		}
		i++
		for kind, body := range registrations(host, i) {
			path := "/v1/connectors"
			if kind == "webhook" {
				path = "/v1/webhooks"
			}
			res := e.do(apitest.Request{Method: "POST", Path: path, Key: key, Body: body})
			require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s %s: %s", kind, host, res.Body)
		}
	}
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: map[string]any{"source": "sock", "kind": "postgres",
		"config": map[string]any{"dsn": "host=/var/run/postgresql dbname=shop", "queries": []any{map[string]any{"type": "t", "sql": "SELECT 1 WHERE $1 IS NULL", "cursor": "id", "subject": "s", "occurred_at": "at"}}}}})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
}

// TestHTTPJSONHeadersSealed: an http_json connector's headers are sealed
// like a Stripe key: the stored configuration and every answer show only
// their last 4, and a pull sends them in full. On HEAD the Authorization
// header was stored in clear in connectors.config.
func TestHTTPJSONHeadersSealed(t *testing.T) {
	const token = "Bearer tok_live_0123456789abcdefWXYZ"
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"data":[{"id":"r1","order":"o_1","at":"2026-11-01T10:00:00Z"}],"next":null}`)
	}))
	defer srv.Close()
	box := testBox(t)
	e := newEnv(t, func(c *Config) { c.Secrets = box })
	tid, key := e.tenant("headers")
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: map[string]any{"source": "refunds", "kind": "http_json",
		"config": json.RawMessage(`{"url":"` + srv.URL + `/refunds","headers":{"Authorization":"` + token + `","X-Api-Key":"k_0123456789abcdef"},` + jsonMapping + `}`)}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "0123456789abcdef", "the answer shows no header value")
	cfg := res.JSON(t)["config"].(map[string]any)
	require.Equal(t, map[string]any{"Authorization": "…WXYZ", "X-Api-Key": "…cdef"}, cfg["headers"])

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/connectors", Key: key})
	require.NotContains(t, string(res.Body), "0123456789abcdef")
	var row string
	require.NoError(t, e.db.Pool().QueryRow(context.Background(),
		`SELECT config::text || coalesce(secret, '') FROM connectors WHERE tenant_id = $1`, tid).Scan(&row))
	require.NotContains(t, row, "0123456789abcdef", "the stored row holds the headers sealed only")

	conns, err := e.db.ListConnectors(context.Background(), tid)
	require.NoError(t, err)
	require.Len(t, conns, 1)
	p, err := pull.OpenConnector(tid, conns[0], pull.Options{HTTP: srv.Client(), Secrets: box})
	require.NoError(t, err)
	page, err := p.Pull(context.Background(), "refunds", "")
	require.NoError(t, err)
	require.Len(t, page.Facts, 1)
	require.Equal(t, []string{token}, got, "the pull sends the header in full")

	// Without a secrets key, headers are refused (as DSN passwords are).
	bare := newEnv(t)
	_, key2 := bare.tenant("headers-nokey")
	res = bare.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key2, Body: map[string]any{"source": "refunds", "kind": "http_json",
		"config": json.RawMessage(`{"url":"` + srv.URL + `/refunds","headers":{"Authorization":"` + token + `"},` + jsonMapping + `}`)}})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, res.ErrMessage(t), "headers: ")
	require.NotContains(t, string(res.Body), "0123456789abcdef")
}

// TestDSNHostaddrChecked: a DSN naming a public host and an internal
// hostaddr is refused at registration, as libpq would dial the hostaddr
// (issue 45, case 8: it passed).
func TestDSNHostaddrChecked(t *testing.T) {
	guard := netguard.New(netguard.Options{Lookup: testLookup})
	e := newEnv(t, func(c *Config) { c.Secrets, c.Guard = testBox(t), guard })
	_, key := e.tenant("hostaddr")
	register := func(dsn string) apitest.Response {
		return e.do(apitest.Request{Method: "POST", Path: "/v1/connectors", Key: key, Body: map[string]any{"source": "pg", "kind": "postgres",
			"config": map[string]any{"dsn": dsn, "queries": []any{map[string]any{"type": "t", "sql": "SELECT 1 WHERE $1 IS NULL", "cursor": "id", "subject": "s", "occurred_at": "at"}}}}})
	}
	for _, dsn := range []string{
		"host=public.example hostaddr=127.0.0.1 dbname=shop user=reader",
		"host=public.example,public.example hostaddr=,10.0.0.5 dbname=shop",
		"postgres://reader@public.example:5432/shop?hostaddr=169.254.169.254",
		"postgres://reader@public.example/shop?hostaddr=%3A%3A1",
	} {
		res := register(dsn)
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s: %s", dsn, res.Body)
		require.Equal(t, "config.dsn: address not allowed", res.ErrMessage(t), dsn)
	}
	res := register("host=public.example hostaddr=db.internal dbname=shop")
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, res.ErrMessage(t), "hostaddr must be IP addresses")
}
