package httpjson

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

const token = "Bearer sk_live_never_in_errors_42"

// api is a small paged JSON API of refunds: GET /refunds?after=N answers
// {"data":[…],"meta":{"next_cursor":"…","has_more":bool}}, two a page.
type api struct {
	mu      sync.Mutex
	n       int
	methods []string
	queries []string
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.methods = append(a.methods, r.Method)
	a.queries = append(a.queries, r.URL.RawQuery)
	a.mu.Unlock()
	if r.Header.Get("Authorization") != token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	after, _ := strconv.Atoi(r.URL.Query().Get("after"))
	var data []map[string]any
	for i := after + 1; i <= a.n && len(data) < 2; i++ {
		data = append(data, map[string]any{
			"id": fmt.Sprintf("re_%d", i), "kind": "refund_created",
			"order":   map[string]any{"id": fmt.Sprintf("o_%d", i), "customer": fmt.Sprintf("c_%d", i%2)},
			"created": time.Date(2026, 11, 1, 10, 0, i, 0, time.UTC).Format(time.RFC3339),
			"detail":  map[string]any{"amount": 100 * i, "currency": "USD", "a/b": "slash"},
		})
	}
	last := after + len(data)
	meta := map[string]any{"has_more": last < a.n, "next_cursor": nil}
	if len(data) > 0 {
		meta["next_cursor"] = strconv.Itoa(last)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "meta": meta})
}

func config(url string) Config {
	return Config{
		URL: url + "/refunds", Headers: map[string]string{"Authorization": token}, CursorParam: "after",
		Items: "/data", Next: "/meta/next_cursor", HasMore: "/meta/has_more",
		Type: "refund_created", Subject: "/order/id", SubjectType: "order", ExternalID: "/id",
		OccurredAt: "/created", Attrs: "/detail", Links: map[string]string{"/order/customer": "customer"},
	}
}

// pullAll reads pages from cursor until the last, as a pull does.
func pullAll(t *testing.T, c *Client, cursor string) commitlayer.FactPage {
	t.Helper()
	all := commitlayer.FactPage{Next: cursor}
	for {
		p, err := c.Pull(context.Background(), "payments", all.Next)
		require.NoError(t, err)
		all.Facts = append(all.Facts, p.Facts...)
		all.Next, all.More = p.Next, p.More
		if !p.More {
			return all
		}
	}
}

func TestPullPagesByCursor(t *testing.T) {
	a := &api{n: 5}
	srv := httptest.NewServer(a)
	defer srv.Close()
	c := &Client{Config: config(srv.URL)}
	p := pullAll(t, c, "")
	require.Len(t, p.Facts, 5)
	require.False(t, p.More)
	require.Equal(t, "5", p.Next)
	require.Equal(t, []string{"", "after=2", "after=4"}, a.queries)
	for _, m := range a.methods {
		require.Equal(t, http.MethodGet, m)
	}
	f := p.Facts[0]
	require.Equal(t, commitlayer.Fact{Source: "payments", Type: "refund_created", Subject: "order:o_1", ExternalID: "re_1",
		OccurredAt: time.Date(2026, 11, 1, 10, 0, 1, 0, time.UTC),
		Attrs:      commitlayer.Attrs{"amount": int64(100), "currency": "USD", "a/b": "slash"},
		Links:      []commitlayer.Subject{"customer:c_1"}}, f)

	// Later: nothing new, the cursor stays; then new rows are read.
	p2 := pullAll(t, c, p.Next)
	require.Empty(t, p2.Facts)
	require.Equal(t, "5", p2.Next)
	a.mu.Lock()
	a.n = 6
	a.mu.Unlock()
	p3 := pullAll(t, c, p2.Next)
	require.Len(t, p3.Facts, 1)
	require.Equal(t, "re_6", p3.Facts[0].ExternalID)
}

func TestPullOnePage(t *testing.T) {
	srv := httptest.NewServer(&api{n: 5})
	defer srv.Close()
	cfg := config(srv.URL)
	c := &Client{Config: cfg}
	p, err := c.Pull(context.Background(), "payments", "")
	require.NoError(t, err)
	require.Len(t, p.Facts, 2)
	require.True(t, p.More)
	require.Equal(t, "2", p.Next)
}

func TestPointerFieldsAndTypes(t *testing.T) {
	body := `{"items":[{"t":"shipped","s":"order:o_9","n":17,"at":1793527200,"x~y":{"k":2.0}}],"next":null}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	defer srv.Close()
	c := &Client{Config: Config{URL: srv.URL, Items: "/items", Next: "/next", TypePointer: "/t", Subject: "/s",
		ExternalID: "/n", OccurredAt: "/at", Attrs: "/x~0y"}}
	p, err := c.Pull(context.Background(), "orders", "")
	require.NoError(t, err)
	require.False(t, p.More)
	require.Equal(t, "", p.Next)
	require.Len(t, p.Facts, 1)
	f := p.Facts[0]
	require.Equal(t, "shipped", f.Type)
	require.Equal(t, commitlayer.Subject("order:o_9"), f.Subject)
	require.Equal(t, "17", f.ExternalID)
	require.Equal(t, time.Unix(1793527200, 0).UTC(), f.OccurredAt)
	require.Equal(t, commitlayer.Attrs{"k": int64(2)}, f.Attrs)
}

func TestBadAnswers(t *testing.T) {
	big := `{"data":[` + strings.Repeat(`{"id":"x"},`, 200) + `{"id":"y"}],"meta":{}}`
	item := func(s string) string { return `{"data":[` + s + `],"meta":{"next_cursor":null}}` }
	good := `{"id":"re_1","kind":"k","order":{"id":"o_1"},"created":"2026-11-01T10:00:00Z","detail":{}}`
	tests := []struct {
		name   string
		status int
		body   string
		cfg    func(*Config)
		is     error
		msg    string
	}{
		{"500", 500, `oops`, nil, ErrBadResponse, "answered 500 Internal Server Error"},
		{"not json", 200, `<html>`, nil, ErrBadResponse, "the answer is not JSON"},
		{"items missing", 200, `{"rows":[]}`, nil, ErrBadResponse, `items "/data" is missing`},
		{"items not an array", 200, `{"data":{}}`, nil, ErrBadResponse, `items "/data" is not an array`},
		{"subject missing", 200, item(`{"id":"re_1","created":"2026-11-01T10:00:00Z"}`), nil, ErrBadResponse, `items[0]: subject "/order/id" is missing`},
		{"bad time", 200, item(`{"id":"re_1","order":{"id":"o_1"},"created":"yesterday"}`), nil, ErrBadResponse, `items[0]: occurred_at "/created": "yesterday" is not RFC 3339`},
		{"id is an object", 200, item(`{"id":{},"order":{"id":"o_1"},"created":"2026-11-01T10:00:00Z"}`), nil, ErrBadResponse, `external_id "/id": is a object`},
		{"attrs not an object", 200, item(`{"id":"re_1","order":{"id":"o_1"},"created":"2026-11-01T10:00:00Z","detail":[1]}`), nil, ErrBadResponse, `attrs "/detail" is not an object`},
		{"duplicate id", 200, item(good + "," + good), nil, ErrBadResponse, `items[1]: external id "re_1" appears twice`},
		{"has_more not bool", 200, `{"data":[],"meta":{"has_more":"yes"}}`, nil, ErrBadResponse, "has_more"},
		{"too large", 200, big, func(c *Config) { c.MaxBytes = 1000 }, ErrBadResponse, "larger than 1000 bytes"},
		{"bad subject", 200, item(`{"id":"re_1","order":{"id":"o 1"},"created":"2026-11-01T10:00:00Z"}`), nil, ErrBadResponse, "subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			cfg := config(srv.URL)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			_, err := (&Client{Config: cfg}).Pull(context.Background(), "payments", "")
			require.ErrorIs(t, err, tt.is)
			require.ErrorContains(t, err, tt.msg)
			require.NotContains(t, err.Error(), "sk_live")
		})
	}
}

func TestTransportFailures(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	cfg := config(slow.URL)
	cfg.Timeout = "100ms"
	cfg.URL += "?token=secret-in-query"
	_, err := (&Client{Config: cfg}).Pull(context.Background(), "payments", "7")
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "timed out")
	require.NotContains(t, err.Error(), "secret-in-query")

	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusFound)
	}))
	defer redirect.Close()
	_, err = (&Client{Config: config(redirect.URL)}).Pull(context.Background(), "payments", "")
	require.ErrorIs(t, err, ErrBadResponse)
	require.ErrorContains(t, err, "redirects are refused")

	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	_, err = (&Client{Config: config(url)}).Pull(context.Background(), "payments", "")
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotContains(t, err.Error(), "sk_live")

	unauth := httptest.NewServer(&api{n: 1})
	defer unauth.Close()
	cfg = config(unauth.URL)
	cfg.Headers = nil
	_, err = (&Client{Config: cfg}).Pull(context.Background(), "payments", "")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 401, se.StatusCode)
}

func TestParsePointer(t *testing.T) {
	doc := map[string]any{"a": []any{map[string]any{"b/c": "x", "m~n": "y", "": "empty"}}, "": "root-empty"}
	tests := []struct {
		p    string
		want any
		ok   bool
	}{
		{"/a/0/b~1c", "x", true}, {"/a/0/m~0n", "y", true}, {"/a/0/", "empty", true}, {"/", "root-empty", true},
		{"/a/1", nil, false}, {"/a/01", nil, false}, {"/a/-1", nil, false}, {"/a/0/zz", nil, false}, {"/a/0/b~1c/d", nil, false},
	}
	for _, tt := range tests {
		p, err := ParsePointer(tt.p)
		require.NoError(t, err, tt.p)
		got, ok := p.Get(doc)
		require.Equal(t, tt.ok, ok, tt.p)
		require.Equal(t, tt.want, got, tt.p)
	}
	whole, err := ParsePointer("")
	require.NoError(t, err)
	got, ok := whole.Get(doc)
	require.True(t, ok)
	require.Equal(t, doc, got)
	for _, bad := range []string{"a", "/x~2", "/x~"} {
		_, err := ParsePointer(bad)
		require.Error(t, err, bad)
	}
}

func TestParseConfig(t *testing.T) {
	good := `{"url":"https://api.example.test/refunds","items":"/data","next":"/next","type":"refund_created","subject":"/order","subject_type":"order","external_id":"/id","occurred_at":"/created"}`
	_, err := ParseConfig([]byte(good))
	require.NoError(t, err)
	with := func(k, v string) string {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(good), &m))
		if v == "" {
			delete(m, k)
		} else {
			var x any
			require.NoError(t, json.Unmarshal([]byte(v), &x))
			m[k] = x
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct{ body, want string }{
		{with("url", ""), "url: is required"},
		{with("url", `"ftp://x/y"`), "url: is not an absolute http"},
		{with("url", `"https://user:pw@x/y"`), "must not hold credentials"},
		{with("next", ""), "next: is required"},
		{with("subject", `"order"`), "subject: JSON pointer"},
		{with("type", ""), "type or type_pointer is required"},
		{with("type_pointer", `"/t"`), "not both"},
		{with("timeout", `"5m"`), "timeout:"},
		{with("max_bytes", `99999999999`), "max_bytes:"},
		{with("headers", `{"Bad Name":"v"}`), "headers:"},
		{with("subject_type", `"Order"`), "subject_type:"},
		{with("method", `"POST"`), "unknown field"},
	}
	for _, tt := range tests {
		_, err := ParseConfig([]byte(tt.body))
		require.ErrorContains(t, err, tt.want, tt.body)
	}
}
