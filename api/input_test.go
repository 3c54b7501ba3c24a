package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/stretchr/testify/require"
)

// Input bounds of issue 10: orphans' since, requested_at, duplicate keys,
// content types, facts from the future.

func TestOrphansSinceBounds(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("orphans-since")
	e.contract(key, payoutContract)
	for _, tc := range []struct {
		name     string
		since    string
		want     int
		contains string
	}{
		{"year one", "0001-01-01T00:00:00Z", http.StatusBadRequest, "since: must be at most 366 days before now"},
		{"367 days back", e.now.Add(-367 * 24 * time.Hour).Format(time.RFC3339), http.StatusBadRequest, "366 days"},
		{"year 9999", "9999-12-31T23:59:59Z", http.StatusBadRequest, "since: must not be after now"},
		{"an hour ahead", e.now.Add(time.Hour).Format(time.RFC3339), http.StatusBadRequest, "since: must not be after now"},
		{"366 days back", e.now.Add(-366 * 24 * time.Hour).Format(time.RFC3339), http.StatusOK, `"orphans":[]`},
		{"now", e.now.Format(time.RFC3339), http.StatusOK, `"orphans":[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "GET", Path: "/v1/actions/orphans?contract_id=send_payout&since=" + url.QueryEscape(tc.since), Key: key})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Contains(t, string(res.Body), tc.contains)
			if tc.want != http.StatusOK {
				require.Equal(t, codeInvalidRequest, res.ErrCode(t))
			}
		})
	}
}

func TestRequestedAtRange(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("requested-at")
	e.contract(key, payoutContract)
	body := func(at any) string {
		s := `{"contract":"send_payout","agent":"a","subject":"account:acc_1"`
		switch v := at.(type) {
		case nil:
		case string:
			s += `,"requested_at":"` + v + `"`
		case rawJSON:
			s += `,"requested_at":` + string(v)
		}
		return s + "}"
	}
	for _, tc := range []struct {
		name     string
		body     string
		want     int
		contains string
	}{
		{"year one", body("0001-01-01T00:00:00Z"), http.StatusBadRequest, "requested_at: must be 1970-01-01T00:00:00Z or later"},
		{"year one with offset", body("0001-01-01T00:00:00+00:00"), http.StatusBadRequest, "requested_at"},
		{"before 1970", body("1969-12-31T23:59:59Z"), http.StatusBadRequest, "requested_at: must be 1970-01-01T00:00:00Z or later"},
		{"empty", body(""), http.StatusBadRequest, "requested_at"},
		{"1970", body("1970-01-01T00:00:00Z"), http.StatusAccepted, ""},
		{"absent", body(nil), http.StatusAccepted, ""},
		{"null", body(rawJSON("null")), http.StatusAccepted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: tc.body,
				Header: map[string]string{"Idempotency-Key": "ra-" + tc.name}})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			if tc.want != http.StatusAccepted {
				require.Equal(t, codeInvalidRequest, res.ErrCode(t))
				require.Contains(t, string(res.Body), tc.contains)
			}
		})
	}
	require.Len(t, e.ver.startCalls(), 3, "only the accepted ones started")
}

type rawJSON string

func TestDuplicateKeys(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("dup-keys")
	e.contract(key, payoutContract)
	const f = `"source":"ledger","type":"payout_sent","subject":"account:acc_1","occurred_at":"2026-11-29T10:00:00Z"`
	const a = `"contract":"send_payout","agent":"a","subject":"account:acc_1"`
	for _, tc := range []struct {
		name, path, key, body string
		contains              string
	}{
		{"facts twice", "/v1/facts", key, `{"facts":[],"facts":[{` + f + `,"external_id":"x"}]}`, `key \"facts\" is given twice`},
		{"fact field twice", "/v1/facts", key, `{"facts":[{` + f + `,"external_id":"x"},{` + f + `,"external_id":"y","external_id":"z"}]}`,
			`key \"external_id\" is given twice in facts[1]`},
		{"attr twice", "/v1/facts", key, `{"facts":[{` + f + `,"external_id":"x","attrs":{"amount":1,"amount":2}}]}`,
			`key \"amount\" is given twice in facts[0].attrs`},
		{"attr twice, escaped", "/v1/facts", key, `{"facts":[{` + f + `,"external_id":"x","attrs":{"amount":1,"am\u006funt":2}}]}`,
			`key \"amount\" is given twice in facts[0].attrs`},
		{"action field twice", "/v1/actions", key, `{` + a + `,"agent":"b"}`, `key \"agent\" is given twice`},
		{"param twice", "/v1/actions", key, `{` + a + `,"params":{"amount":2500,"currency":"USD","amount":1}}`, `key \"amount\" is given twice in params`},
		{"nested param twice", "/v1/actions", key, `{` + a + `,"params":{"x":[{"y":{"k":1,"k":2}}]}}`, `key \"k\" is given twice in params.x[0].y`},
		{"claim field twice", "/v1/actions", key, `{` + a + `,"claim":{"status":"success","status":"failure"}}`, `key \"status\" is given twice in claim`},
		{"trace key twice", "/v1/actions", key, `{` + a + `,"trace":[{"tool":"a","tool":"b"}]}`, `key \"tool\" is given twice in trace[0]`},
		{"connector field twice", "/v1/connectors", key, `{"source":"ledger","kind":"http_events","url":"http://127.0.0.1:1/e","url":"http://127.0.0.1:2/e"}`, `key \"url\" is given twice`},
		{"tenant name twice", "/v1/admin/tenants", adminKey, `{"name":"a","name":"b"}`, `key \"name\" is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: tc.path, Key: tc.key, Body: tc.body,
				Header: map[string]string{"Content-Type": "application/json"}})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			require.Equal(t, codeInvalidJSON, res.ErrCode(t), "%s", res.Body)
			require.Contains(t, string(res.Body), tc.contains)
		})
	}
	require.Empty(t, e.ver.startCalls())

	// The same key in sibling objects, or in different facts, is fine.
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: `{"facts":[{` + f + `,"external_id":"x","attrs":{"a":{"k":1},"b":{"k":1}}},{` + f + `,"external_id":"y"}]}`})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: `{` + a + `,"params":{"a":{"k":1},"b":[{"k":1},{"k":2}]},"trace":[{"k":1},{"k":1}]}`})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
}

func TestContentTypes(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("content-types")
	e.contract(key, payoutContract)
	n := 0
	routes := []struct {
		name, path, key string
		body            func() string
		ok              int
	}{
		{"facts", "/v1/facts", key, func() string {
			return `{"facts":[{"source":"ledger","type":"payout_sent","subject":"account:acc_1","external_id":"ct-` +
				strings.Repeat("x", n) + `","occurred_at":"2026-11-29T10:00:00Z"}]}`
		}, http.StatusOK},
		{"actions", "/v1/actions", key, func() string {
			return `{"contract":"send_payout","agent":"a","subject":"account:acc_1"}`
		}, http.StatusAccepted},
		{"connectors", "/v1/connectors", key, func() string {
			return `{"source":"src` + strings.Repeat("x", n) + `","kind":"http_events","url":"http://127.0.0.1:9/events"}`
		}, http.StatusCreated},
		{"tenants", "/v1/admin/tenants", adminKey, func() string { return `{"name":"ct"}` }, http.StatusCreated},
	}
	for _, ct := range []struct {
		contentType string
		accepted    bool
	}{
		{"", true}, // curl-friendliness: no header is taken as JSON
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON; Charset=UTF-8", true},
		{"application/merge-patch+json", true},
		{"application/vnd.commitlayer+json; charset=utf-8", true},
		{"text/plain", false},
		{"application/x-www-form-urlencoded", false}, // what curl -d sends
		{"multipart/form-data; boundary=x", false},
		{"application/yaml", false},
		{"application/xml", false},
		{"application/jsonx", false},
		{"text/json+xml", false},
		{"application/json; charset=latin1", false},
		{"application/", false},
		{"not a media type", false},
	} {
		for _, rt := range routes {
			t.Run(rt.name+" "+ct.contentType, func(t *testing.T) {
				n++
				h := map[string]string{}
				if ct.contentType != "" {
					h["Content-Type"] = ct.contentType
				}
				res := e.do(apitest.Request{Method: "POST", Path: rt.path, Key: rt.key, Body: rt.body(), Header: h})
				if ct.accepted {
					require.Equal(t, rt.ok, res.Status, "%s", res.Body)
					return
				}
				require.Equal(t, http.StatusUnsupportedMediaType, res.Status, "%s", res.Body)
				require.Equal(t, codeUnsupportedMediaType, res.ErrCode(t))
				require.Contains(t, string(res.Body), "Content-Type")
				require.Equal(t, "application/json", res.Header.Get("Accept-Post"))
			})
		}
	}

	// Auth comes first: a bad key with a bad type is 401.
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: "nope", Body: `{}`, Header: map[string]string{"Content-Type": "text/plain"}})
	require.Equal(t, http.StatusUnauthorized, res.Status)

	// Contracts keep taking YAML and JSON, whatever they are labelled.
	for _, c := range []struct{ ctype, body string }{
		{"application/yaml", strings.Replace(payoutContract, "send_payout", "ct_yaml", 1)},
		{"text/plain", strings.Replace(payoutContract, "send_payout", "ct_text", 1)},
		{"application/json", `{"id":"ct_json","kind":"action","subject":"account","settlement":"10m","watch":"1h","sources":["ledger"],"effects":[{"id":"e","source":"ledger","type":"payout_sent"}]}`},
	} {
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/contracts", Key: key, Body: c.body, Header: map[string]string{"Content-Type": c.ctype}})
		require.Equal(t, http.StatusCreated, res.Status, "%s: %s", c.ctype, res.Body)
	}
}

func TestFactsFromTheFuture(t *testing.T) {
	at := func(e *env, d time.Duration) string { return e.now.Add(d).Format(time.RFC3339Nano) }
	batch := func(e *env, d time.Duration) map[string]any {
		f0, f1 := fact(1, "account:acc_1"), fact(2, "account:acc_1")
		f1["occurred_at"] = at(e, d)
		return map[string]any{"facts": []any{f0, f1}}
	}
	t.Run("default skew 24h", func(t *testing.T) {
		e := newEnv(t)
		_, key := e.tenant("future-default")
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: batch(e, 24*time.Hour+time.Second)})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		require.Equal(t, codeInvalidRequest, res.ErrCode(t))
		require.Contains(t, string(res.Body), "facts[1].occurred_at: "+at(e, 24*time.Hour+time.Second)+" is later than "+
			at(e, 24*time.Hour)+", the server's clock plus 24h0m0s")
		res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{map[string]any{
			"source": "ledger", "type": "t", "subject": "a:b", "external_id": "far", "occurred_at": "9999-12-31T23:59:59Z"}}}})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "facts[0].occurred_at")
		res = e.do(apitest.Request{Method: "GET", Path: "/v1/sources", Key: key})
		require.JSONEq(t, `{"sources":[],"span_rejections":[]}`, string(res.Body), "nothing of a refused batch is stored")

		res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: batch(e, 24*time.Hour)})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})
	t.Run("configured skew", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.MaxFutureSkew = time.Minute })
		_, key := e.tenant("future-minute")
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: batch(e, 2*time.Minute)})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "facts[1].occurred_at")
		require.Contains(t, string(res.Body), "plus 1m0s")
		res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: batch(e, 30*time.Second)})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})
}

// TestDecodeJSONNamesGivenTwice: a name given twice in any object is
// refused naming it and where it is; names are compared as decoded and
// case matters.
func TestDecodeJSONNamesGivenTwice(t *testing.T) {
	many := func(dupAt int) string {
		var b strings.Builder
		b.WriteString(`{"o":{`)
		for i := range 40 {
			if i > 0 {
				b.WriteString(",")
			}
			k := i
			if i == dupAt {
				k = 3
			}
			b.WriteString(`"k` + strconv.Itoa(k) + `":[1,{"x":null}]`)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	for _, tc := range []struct {
		name, in, want string // want: the message, "" when none
	}{
		{"none", `{"a":1,"b":{"a":1},"c":[{"a":1},{"a":1}]}`, ""},
		{"top", `{"a":1,"b":2,"a":3}`, `key "a" is given twice`},
		{"escaped", `{"a":1,"\u0061":2}`, `key "a" is given twice`},
		{"case differs", `{"a":1,"A":2}`, ""},
		{"in array in object", `{"x":[0,[{"k":1}],{"k":1,"k":2}]}`, `key "k" is given twice in x[2]`},
		{"top-level array", `[{"k":1},{"k":1,"k":1}]`, `key "k" is given twice in [1]`},
		{"after a value object", `{"a":{"b":1},"c":{"b":1},"a":0}`, `key "a" is given twice`},
		{"many keys, none twice", many(-1), ""},
		{"many keys, the 31st twice", many(30), `key "k3" is given twice in o`},
		{"a duplicate before malformed input", `{"a":1,"a"`, `key "a" is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			err := decodeJSON(strings.NewReader(tc.in), &v)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			requireClientError(t, err)
			var ae *apiError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, codeInvalidJSON, ae.Code)
			require.Equal(t, tc.want, ae.Message)
		})
	}
}

func TestIsJSONMediaType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json;charset=UTF-8": true, "application/json; charset=utf8": true,
		"application/problem+json": true, "APPLICATION/JSON": true,
		"application/+json": false, "application/json; charset=utf-16": false, "text/json": false,
		"application/json-seq": false, "application/x-ndjson": false, "json": false, "": false, ";": false,
	} {
		require.Equal(t, want, isJSONMediaType(ct), ct)
	}
}
