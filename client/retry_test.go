package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

const secretKey = "cl_secret_key_never_in_errors_0123456789"

// scripted answers each request with the next step of a script and records
// what it saw.
type scripted struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter, r *http.Request)
	reqs  []seen
}

type seen struct {
	method, path, query, key, auth, body, ctype string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b := new(strings.Builder)
	_, _ = fmt.Fprint(b, readAll(r))
	s.reqs = append(s.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Idempotency-Key"),
		r.Header.Get("Authorization"), b.String(), r.Header.Get("Content-Type")})
	i := len(s.reqs) - 1
	var step func(w http.ResponseWriter, r *http.Request)
	if i < len(s.steps) {
		step = s.steps[i]
	} else {
		step = s.steps[len(s.steps)-1]
	}
	s.mu.Unlock()
	step(w, r)
}

func (s *scripted) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func readAll(r *http.Request) string {
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

func fail(status int, code string, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req-1")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error":{"code":%q,"message":"try again"}}`, code)
	}
}

func ok(status int, body string, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, body)
	}
}

// hangUp closes the connection without an answer: a network error after
// the request was sent.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// newTestClient returns a client on srv whose sleeps are recorded, not
// slept.
func newTestClient(t *testing.T, srv *httptest.Server, opts ...Option) (*Client, *[]time.Duration) {
	t.Helper()
	c, err := New(srv.URL, secretKey, append([]Option{WithRetry(RetryPolicy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second})}, opts...)...)
	require.NoError(t, err)
	var mu sync.Mutex
	sleeps := &[]time.Duration{}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*sleeps = append(*sleeps, d)
		return ctx.Err()
	}
	return c, sleeps
}

var testAction = commitlayer.Action{Contract: "send_payout", Agent: "agent-1", Subject: "account:a_1",
	Params: commitlayer.Attrs{"amount": int64(2500)}, Claim: commitlayer.Claim{Status: "success"}}

func TestRecordActionRetriesWithTheSameKey(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter, *http.Request){
		fail(http.StatusServiceUnavailable, "unavailable"),
		fail(http.StatusTooManyRequests, "rate_limited", "Retry-After", "3"),
		hangUp,
		ok(http.StatusAccepted, `{"id":"act_1","verdict_url":"/v1/actions/act_1"}`, "Idempotent-Replayed", "true"),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, sleeps := newTestClient(t, srv)

	acc, err := c.RecordAction(context.Background(), testAction)
	require.NoError(t, err)
	require.Equal(t, "act_1", acc.ID)
	require.True(t, acc.Replayed)

	reqs := s.seen()
	require.Len(t, reqs, 4)
	key := reqs[0].key
	require.NotEmpty(t, key)
	for _, r := range reqs {
		require.Equal(t, key, r.key, "every attempt carries the same Idempotency-Key")
		require.Equal(t, "POST", r.method)
		require.Equal(t, "/v1/actions", r.path)
		require.Equal(t, "Bearer "+secretKey, r.auth)
		require.Equal(t, "application/json", r.ctype)
		require.Equal(t, reqs[0].body, r.body, "the body is re-sent whole")
	}
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(reqs[0].body), &body))
	require.Equal(t, map[string]any{"contract": "send_payout", "agent": "agent-1", "subject": "account:a_1",
		"params": map[string]any{"amount": 2500.0}, "claim": map[string]any{"status": "success"}}, body,
		"optional fields left out so the server applies its defaults")

	// The hang-up on a kept-alive connection is retried at once by
	// net/http itself (a request with an Idempotency-Key counts as
	// idempotent there), with the same key: two waits, not three.
	require.Len(t, *sleeps, 2)
	require.GreaterOrEqual(t, (*sleeps)[0], 50*time.Millisecond)
	require.LessOrEqual(t, (*sleeps)[0], 100*time.Millisecond)
	require.Equal(t, 3*time.Second, (*sleeps)[1], "Retry-After is honoured")

	// A second logical call gets a key of its own.
	_, err = c.RecordAction(context.Background(), testAction)
	require.NoError(t, err)
	reqs = s.seen()
	require.NotEqual(t, key, reqs[len(reqs)-1].key)

	// A caller's key is used as given.
	_, err = c.RecordAction(context.Background(), testAction, RecordOptions{IdempotencyKey: "step-42"})
	require.NoError(t, err)
	reqs = s.seen()
	require.Equal(t, "step-42", reqs[len(reqs)-1].key)
}

func TestRetryDecisions(t *testing.T) {
	tests := []struct {
		name     string
		steps    []func(http.ResponseWriter, *http.Request)
		call     func(*Client) error
		attempts int
		status   int
		code     string
	}{
		{"bounded on 503", []func(http.ResponseWriter, *http.Request){fail(503, "unavailable")},
			func(c *Client) error { _, err := c.ListContracts(context.Background()); return err }, 4, 503, "unavailable"},
		{"400 not retried", []func(http.ResponseWriter, *http.Request){fail(400, "invalid_request")},
			func(c *Client) error { _, err := c.PostFacts(context.Background(), nil); return err }, 1, 400, "invalid_request"},
		{"409 not retried", []func(http.ResponseWriter, *http.Request){fail(409, "idempotency_conflict")},
			func(c *Client) error { _, err := c.RecordAction(context.Background(), testAction); return err }, 1, 409, "idempotency_conflict"},
		{"tenant: 500 not retried (could create two)", []func(http.ResponseWriter, *http.Request){fail(500, "internal")},
			func(c *Client) error { _, err := c.CreateTenant(context.Background(), "t"); return err }, 1, 500, "internal"},
		{"tenant: 429 retried", []func(http.ResponseWriter, *http.Request){fail(429, "rate_limited"), ok(201, `{"id":"t_1","name":"t","api_key":"k"}`)},
			func(c *Client) error { _, err := c.CreateTenant(context.Background(), "t"); return err }, 2, 0, ""},
		{"tenant: hang-up not retried", []func(http.ResponseWriter, *http.Request){hangUp},
			func(c *Client) error { _, err := c.CreateTenant(context.Background(), "t"); return err }, 1, 0, ""},
		{"connector: 503 with Retry-After retried", []func(http.ResponseWriter, *http.Request){fail(503, "unavailable", "Retry-After", "1"), ok(201, `{"id":"c_1"}`)},
			func(c *Client) error {
				_, err := c.CreateConnector(context.Background(), ConnectorInput{Source: "s", Kind: "http_events", URL: "http://x"})
				return err
			}, 2, 0, ""},
		{"get: hang-up retried", []func(http.ResponseWriter, *http.Request){hangUp, ok(200, `{"contracts":[]}`)},
			func(c *Client) error { _, err := c.ListContracts(context.Background()); return err }, 2, 0, ""},
		{"404 typed", []func(http.ResponseWriter, *http.Request){fail(404, "not_found")},
			func(c *Client) error { _, err := c.GetAction(context.Background(), "nope"); return err }, 1, 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{steps: tt.steps}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c, _ := newTestClient(t, srv)
			err := tt.call(c)
			require.Len(t, s.seen(), tt.attempts)
			if tt.status == 0 && tt.code == "" && tt.attempts > 1 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.NotContains(t, err.Error(), secretKey)
			if tt.status == 0 {
				return
			}
			var ae *APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tt.status, ae.StatusCode)
			require.Equal(t, tt.code, ae.Code)
			require.Equal(t, "try again", ae.Message)
			require.Equal(t, "req-1", ae.RequestID)
			require.True(t, IsCode(err, tt.code))
			require.Equal(t, tt.status == 404, IsNotFound(err))
		})
	}
}

func TestRetryStopsAtTheCallersDeadline(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter, *http.Request){fail(429, "rate_limited", "Retry-After", "5")}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, sleeps := newTestClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := c.ListTenants(ctx)
	require.True(t, IsCode(err, "rate_limited"))
	require.Len(t, s.seen(), 1, "a Retry-After past the deadline is not waited for")
	require.Empty(t, *sleeps)
}

func TestAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	s := &scripted{steps: []func(http.ResponseWriter, *http.Request){
		func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		},
		ok(200, `{"status":"ok"}`),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer close(release)
	c, _ := newTestClient(t, srv, WithHTTPClient(&http.Client{Timeout: 100 * time.Millisecond}))
	require.NoError(t, c.Health(context.Background()))
	require.Len(t, s.seen(), 2, "a hung attempt times out and the GET is retried")
}

func TestDialErrorIsRetriedForAnyCall(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	c, err := New("http://"+addr, secretKey, WithRetry(RetryPolicy{MaxAttempts: 3}))
	require.NoError(t, err)
	var sleeps int
	c.sleep = func(context.Context, time.Duration) error { sleeps++; return nil }
	_, err = c.CreateTenant(context.Background(), "t")
	require.Error(t, err)
	require.Equal(t, 2, sleeps, "a connection never made is safe to retry, even for a create")
	require.Contains(t, err.Error(), "POST /v1/admin/tenants")
	require.NotContains(t, err.Error(), secretKey)
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-3", 0}, {"7", 7 * time.Second}, {" 2 ", 2 * time.Second}, {"soon", 0},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(-30 * time.Second).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, parseRetryAfter(tt.in, now), "%q", tt.in)
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://x/?a=1", "::"} {
		_, err := New(u, "k")
		require.Error(t, err, "%q", u)
	}
	c, err := New("http://127.0.0.1:1/", "k")
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, c.http.Timeout, "the default client has a timeout")
}

func TestPutContractContentType(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter, *http.Request){
		ok(201, `{"id":"c","version":1}`), ok(200, `{"id":"c","version":1}`),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := newTestClient(t, srv)
	_, created, err := c.PutContract(context.Background(), []byte("id: c\n"))
	require.NoError(t, err)
	require.True(t, created)
	_, created, err = c.PutContract(context.Background(), []byte(` {"id":"c"}`))
	require.NoError(t, err)
	require.False(t, created)
	reqs := s.seen()
	require.Equal(t, "application/yaml", reqs[0].ctype)
	require.Equal(t, "application/json", reqs[1].ctype)
}

func TestWaitForVerdictPolls(t *testing.T) {
	detail := func(verdict string) func(http.ResponseWriter, *http.Request) {
		return ok(200, `{"action":{"id":"a1","contract":"c","agent":"x","subject":"order:o_1","params":{},"requested_at":"2026-01-01T00:00:00Z","claim":{"status":"success"}},"verdict":`+verdict+`,"history":[]}`)
	}
	prov := `{"action_id":"a1","status":"UNKNOWN","provisional":true,"lenses":{"outcome":"UNKNOWN","policy":"PASS"},"findings":[],"unavailable_sources":[],"claim_contradicted":false,"version":1}`
	final := `{"action_id":"a1","status":"PASS","provisional":false,"lenses":{"outcome":"PASS","policy":"PASS"},"findings":[],"unavailable_sources":[],"claim_contradicted":false,"version":2}`
	tests := []struct {
		stage    Stage
		wait     bool
		want     commitlayer.Status
		attempts int
	}{
		{Provisional, false, commitlayer.StatusUnknown, 3},
		{Final, false, commitlayer.StatusPass, 5},
		{Final, true, commitlayer.StatusPass, 5},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s wait=%v", tt.stage, tt.wait), func(t *testing.T) {
			s := &scripted{steps: []func(http.ResponseWriter, *http.Request){
				detail("null"), fail(503, "unavailable"), detail(prov), detail(prov), detail(final),
			}}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c, sleeps := newTestClient(t, srv, WithServerWait(tt.wait),
				WithPolling(PollPolicy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Factor: 2}))
			v, err := c.WaitForVerdict(context.Background(), "a1", tt.stage)
			require.NoError(t, err)
			require.Equal(t, tt.want, v.Status)
			reqs := s.seen()
			require.Len(t, reqs, tt.attempts)
			for _, r := range reqs {
				require.Equal(t, "/v1/actions/a1", r.path)
				if tt.wait {
					q, err := url.ParseQuery(r.query)
					require.NoError(t, err)
					require.Equal(t, string(tt.stage), q.Get("wait"))
					require.Equal(t, "20", q.Get("timeout"), "the server's default wait: no deadline, the default http timeout")
				} else {
					require.Empty(t, r.query)
				}
			}
			for _, d := range *sleeps {
				require.LessOrEqual(t, d, 5*time.Second)
			}
		})
	}
}

func TestWaitForVerdictEnds(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter, *http.Request){
		ok(200, `{"action":{"id":"a1"},"verdict":null,"history":[]}`),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := New(srv.URL, secretKey, WithPolling(PollPolicy{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.WaitForVerdict(ctx, "a1", Final)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.GreaterOrEqual(t, len(s.seen()), 2, "it polled again before giving up")

	_, err = c.WaitForVerdict(context.Background(), "a1", Stage("soon"))
	require.ErrorContains(t, err, `stage "soon"`)

	s404 := httptest.NewServer(http.HandlerFunc(fail(404, "not_found")))
	defer s404.Close()
	c, err = New(s404.URL, secretKey)
	require.NoError(t, err)
	_, err = c.WaitForVerdict(context.Background(), "a1", Provisional)
	require.True(t, IsNotFound(err))
}

func TestBackoffGrowsWithinBounds(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}.withDefaults()
	for n, top := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		top *= time.Millisecond
		for range 50 {
			d := p.backoff(n + 1)
			require.GreaterOrEqual(t, d, top/2, "attempt %d", n+1)
			require.LessOrEqual(t, d, top, "attempt %d", n+1)
		}
	}
	require.Equal(t, 5, RetryPolicy{}.withDefaults().MaxAttempts)
}

func TestUnsafeCallsCarryNoIdempotencyKey(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter, *http.Request){ok(201, `{"id":"t"}`)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := newTestClient(t, srv)
	_, err := c.CreateTenant(context.Background(), "t")
	require.NoError(t, err)
	_, err = c.CreateConnector(context.Background(), ConnectorInput{Source: "s", Kind: "http_events", URL: "http://x"})
	require.NoError(t, err)
	_, err = c.PostFacts(context.Background(), nil)
	require.NoError(t, err)
	reqs := s.seen()
	require.Empty(t, reqs[0].key)
	require.Empty(t, reqs[1].key)
	require.NotEmpty(t, reqs[2].key)
}
