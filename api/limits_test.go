package api

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/apitest"
)

// TestWrongBearerKeysLimitedPerAddress: past DefaultKeyFailures wrong keys
// in a minute, an address gets 429 with Retry-After for any key, on tenant
// and admin routes alike; other addresses are not affected; a burst gets
// exactly DefaultKeyFailures 401s (issue 45, case 6: 30 wrong keys, 30 x
// 401).
func TestWrongBearerKeysLimitedPerAddress(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("bearer-limit")
	addr := "[2001:db8:" + randHex(2) + ":45::1]:999"
	get := func(path, key, from string) apitest.Response {
		return e.do(apitest.Request{Method: "GET", Path: path, Key: key, RemoteAddr: from})
	}
	for i := range DefaultKeyFailures {
		path := "/v1/contracts"
		if i%2 == 1 {
			path = "/v1/admin/tenants"
		}
		require.Equal(t, http.StatusUnauthorized, get(path, "cl_wrong_"+randHex(4), addr).Status, "wrong key %d", i+1)
	}
	require.Equal(t, http.StatusOK, get("/v1/contracts", key, "[2001:db8:"+randHex(2)+":46::1]:1").Status, "another address")
	for _, k := range []string{"cl_wrong", key, "not-even-a-key"} {
		res := get("/v1/contracts", k, addr)
		require.Equal(t, http.StatusTooManyRequests, res.Status, "%s", res.Body)
		require.Equal(t, codeTooManyKeys, res.ErrCode(t))
		require.Equal(t, "60", res.Header.Get("Retry-After"))
	}
	require.Equal(t, http.StatusTooManyRequests, get("/v1/admin/tenants", adminKey, addr).Status, "the admin key too")
	require.Equal(t, http.StatusTooManyRequests, get("/v1/contracts", key, strings.Replace(addr, "::1]", "::beef]", 1)).Status,
		"another address of the same IPv6 /64")
	e.now = e.now.Add(61 * time.Second)
	require.Equal(t, http.StatusOK, get("/v1/contracts", key, addr).Status, "the minute ended")

	// A burst from a fresh address.
	burst := "[2001:db8:" + randHex(2) + ":47::1]:1"
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			res := apitest.Serve(t, e.srv.Handler(), apitest.Request{Method: "GET", Path: "/v1/contracts", Key: "cl_wrong_" + randHex(4), RemoteAddr: burst}.HTTP(t))
			mu.Lock()
			codes[res.Status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusUnauthorized: DefaultKeyFailures, http.StatusTooManyRequests: 30 - DefaultKeyFailures}, codes)
}

// TestTrustedProxiesName the client: X-Forwarded-For is believed from a
// trusted peer only, and two clients behind it are limited apart.
func TestTrustedProxiesNameTheClient(t *testing.T) {
	e := newEnv(t)
	p, err := ParseProxies("10.9.0.0/16 192.0.2.7")
	require.NoError(t, err)
	_, err = ParseProxies("10.9.0.0/99")
	require.Error(t, err)
	none, err := ParseProxies(" ")
	require.NoError(t, err)
	require.Nil(t, none)

	var seen string
	var https bool
	h := p.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen, https = ClientAddr(r), HTTPS(r) }))
	for _, tc := range []struct{ peer, xff, proto, want string }{
		{"10.9.1.1:500", "203.0.113.5", "https", "203.0.113.5"},
		{"10.9.1.1:500", "198.51.100.1, 203.0.113.5, 10.9.3.3", "https", "203.0.113.5"},
		{"192.0.2.7:1", "", "http", "192.0.2.7"},
		{"203.0.113.9:1", "198.51.100.77", "https", "203.0.113.9"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", tc.xff)
		r.Header.Set("X-Forwarded-Proto", tc.proto)
		h.ServeHTTP(httptest.NewRecorder(), r)
		require.Equal(t, tc.want, seen, "%+v", tc)
		require.Equal(t, tc.proto == "https" && tc.peer != "203.0.113.9:1", https, "%+v", tc)
	}

	// Through the API: wrong keys of one client behind the proxy do not
	// block another.
	srv := p.Wrap(e.srv.Handler())
	send := func(client string) int {
		r := apitest.Request{Method: "GET", Path: "/v1/contracts", Key: "cl_wrong", RemoteAddr: "10.9.0.1:4000",
			Header: map[string]string{"X-Forwarded-For": client}}.HTTP(t)
		return apitest.Serve(t, srv, r).Status
	}
	a, b := "2001:db8:"+randHex(2)+":48::1", "2001:db8:"+randHex(2)+":49::1"
	for range DefaultKeyFailures {
		require.Equal(t, http.StatusUnauthorized, send(a))
	}
	require.Equal(t, http.StatusTooManyRequests, send(a))
	require.Equal(t, http.StatusUnauthorized, send(b))
}

// TestZeroTimeIsATime: 0001-01-01T00:00:00Z given as since or until is a
// time (or a 400 naming the field), never "not given" (issue 45, case 7:
// until= with it listed every action, stats?since= with it answered about
// until).
func TestZeroTimeIsATime(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("zero-time")
	e.contract(key, payoutContract)
	e.action(key, "account:acc_z", nil)
	const zero = "0001-01-01T00:00:00Z"
	list := func(q url.Values) (int, []any, string) {
		res := e.do(apitest.Request{Method: "GET", Path: "/v1/actions?" + q.Encode(), Key: key})
		var out struct {
			Actions []any `json:"actions"`
		}
		if res.Status == http.StatusOK {
			require.NoError(t, json.Unmarshal(res.Body, &out))
			return res.Status, out.Actions, ""
		}
		return res.Status, nil, res.ErrMessage(t)
	}
	status, actions, _ := list(url.Values{"since": {zero}})
	require.Equal(t, http.StatusOK, status)
	require.Len(t, actions, 1, "since the first instant: everything")
	status, actions, msg := list(url.Values{"until": {zero}})
	require.Equal(t, http.StatusBadRequest, status, "nothing is before the first instant: %v", actions)
	require.Contains(t, msg, "until:")
	status, _, msg = list(url.Values{"since": {zero}, "until": {zero}})
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, msg, "until:")

	stats := func(q string) apitest.Response {
		return e.do(apitest.Request{Method: "GET", Path: "/v1/actions/stats?" + q, Key: key})
	}
	until := url.QueryEscape(e.now.Add(time.Minute).Format(time.RFC3339))
	res := stats("since=" + zero + "&until=" + until + "&bucket=1m")
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, res.ErrMessage(t), "bucket: cuts the window into", "since was given: the window is 2 000 years of minutes")
	res = stats("since=" + zero + "&until=" + until + "&bucket=2000000h")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct {
		Since  time.Time `json:"since"`
		Totals struct {
			Pending int `json:"pending"`
		} `json:"totals"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.True(t, got.Since.IsZero(), "since is the time given, not a day before until: %s", got.Since)
	require.Equal(t, 1, got.Totals.Pending)
	res = stats("until=" + zero)
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Contains(t, res.ErrMessage(t), "until:")
	res = stats("since=" + zero + "&until=" + zero)
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Contains(t, res.ErrMessage(t), "until:")
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
