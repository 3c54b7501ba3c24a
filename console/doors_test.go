package console_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/console"
)

// randomAddr is a client address of the test's own: the login limits are
// counted in the database every test process shares.
func randomAddr() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("[2001:db8:%x:%x::1]:4000", b[:2], b[2:]) // IPv6 is limited per /64
}

// serve sends one request to h from addr, with header pairs.
func serve(h http.Handler, method, path, addr string, form url.Values, header ...string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.RemoteAddr = addr
	h.ServeHTTP(rec, req)
	return rec
}

func sessionCookie(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	for _, c := range rec.Result().Cookies() {
		if c.Name == console.CookieName && c.Value != "" {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("no session cookie in %v", rec.Header())
	return ""
}

// TestSessionsAreSharedAndSurviveARestart: a login made through one
// console (one API process) works through another on the same database
// and through one started after it (a restart); a logout through either
// ends it for both (issue 45, case 5: sessions lived in one process's
// memory).
func TestSessionsAreSharedAndSurviveARestart(t *testing.T) {
	fx := newFixture(t)
	other := func() http.Handler {
		c, err := console.New(console.Config{Store: fx.db, Now: fx.clock})
		require.NoError(t, err)
		return c.Handler()
	}
	a, b := fx.console.Handler(), other()
	addr := randomAddr()
	rec := serve(a, http.MethodPost, "/console/login", addr, url.Values{"api_key": {fx.key}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	ck := sessionCookie(t, rec)
	for name, h := range map[string]http.Handler{"the same process": a, "another process": b, "a restarted process": other()} {
		rec = serve(h, http.MethodGet, "/console/", addr, nil, "Cookie", ck)
		require.Equal(t, http.StatusOK, rec.Code, name)
		require.Contains(t, rec.Body.String(), fx.tenant.Name, name)
	}
	token := csrf(t, rec.Body.String())
	rec = serve(b, http.MethodPost, "/console/logout", addr, url.Values{"csrf": {token}}, "Cookie", ck)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, http.StatusSeeOther, serve(a, http.MethodGet, "/console/", addr, nil, "Cookie", ck).Code, "logged out everywhere")
}

// TestNoTenantEvictsAnother: a tenant that logs in past its cap ends its
// own oldest sessions, never another tenant's (case 5: 10 050 logins
// evicted every other tenant's session).
func TestNoTenantEvictsAnother(t *testing.T) {
	fx := newFixture(t)
	c, err := console.New(console.Config{Store: fx.db, Now: fx.clock, TenantSessions: 3, TenantLogins: 1000})
	require.NoError(t, err)
	h := c.Handler()
	_, otherKey, err := fx.db.CreateTenant(t.Context(), "other tenant")
	require.NoError(t, err)
	login := func(key string) string {
		rec := serve(h, http.MethodPost, "/console/login", randomAddr(), url.Values{"api_key": {key}})
		require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
		return sessionCookie(t, rec)
	}
	victim := login(fx.key)
	var mine []string
	for range 10 {
		fx.setClock(fx.clock().Add(time.Second))
		mine = append(mine, login(otherKey))
	}
	live := func(ck string) bool {
		return serve(h, http.MethodGet, "/console/", randomAddr(), nil, "Cookie", ck).Code == http.StatusOK
	}
	require.True(t, live(victim), "another tenant's session lives on")
	for i, ck := range mine {
		require.Equal(t, i >= 7, live(ck), "the tenant's session %d: only its 3 newest live", i)
	}
}

// TestLoginBurstCannotExceedTheLimit: 40 wrong keys sent at once from one
// address get exactly 5 answers of 401, the rest 429 (case 6: 6-40 of 40
// were checked against a limit of 5).
func TestLoginBurstCannotExceedTheLimit(t *testing.T) {
	fx := newFixture(t)
	h, addr := fx.console.Handler(), randomAddr()
	codes := make(chan int, 40)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			codes <- serve(h, http.MethodPost, "/console/login", addr, url.Values{"api_key": {fmt.Sprintf("cl_guess_%d", i)}}).Code
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	require.Equal(t, map[int]int{http.StatusUnauthorized: console.DefaultLoginFailures, http.StatusTooManyRequests: 40 - console.DefaultLoginFailures}, count)
	rec := serve(h, http.MethodPost, "/console/login", addr, url.Values{"api_key": {fx.key}})
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "the right key too, until the minute ends")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
}

// TestLoginsLimitedPerTenant: a tenant's key logs in DefaultTenantLogins
// times a minute, from any addresses; then 429 until the minute ends.
func TestLoginsLimitedPerTenant(t *testing.T) {
	fx := newFixture(t)
	h := fx.console.Handler()
	for i := range console.DefaultTenantLogins {
		require.Equal(t, http.StatusSeeOther, serve(h, http.MethodPost, "/console/login", randomAddr(), url.Values{"api_key": {fx.key}}).Code, "login %d", i)
	}
	rec := serve(h, http.MethodPost, "/console/login", randomAddr(), url.Values{"api_key": {fx.key}})
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Empty(t, rec.Result().Cookies(), "no session")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	fx.setClock(fx.clock().Add(61 * time.Second))
	require.Equal(t, http.StatusSeeOther, serve(h, http.MethodPost, "/console/login", randomAddr(), url.Values{"api_key": {fx.key}}).Code)
}

// TestSmallerDoors (case 8): a login from a sandboxed frame (Origin: null)
// is refused; next= stays in the console once cleaned; the assets folder
// is not listed.
func TestSmallerDoors(t *testing.T) {
	fx := newFixture(t)
	h := fx.console.Handler()
	rec := serve(h, http.MethodPost, "/console/login", randomAddr(), url.Values{"api_key": {fx.key}}, "Origin", "null")
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Empty(t, rec.Result().Cookies())

	for next, want := range map[string]string{
		"/console/../v1/admin/tenants":         "/console/",
		"/console/%2e%2e/v1/admin/tenants":     "/console/",
		"/console/%2E%2E/%2E%2E/evil":          "/console/",
		"/console/./actions/../../v1/actions":  "/console/",
		"/console/actions/../contracts?x=1":    "/console/contracts?x=1",
		"/console/actions/x/../?status=FAIL":   "/console/actions/?status=FAIL",
		"/console/actions/%2F%2Fevil.example/": "/console/actions/evil.example/",
	} {
		rec := serve(h, http.MethodPost, "/console/login", randomAddr(), url.Values{"api_key": {fx.key}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, rec.Code, next)
		loc := rec.Header().Get("Location")
		require.Equal(t, want, loc, next)
		base, err := url.Parse("https://console.example/console/login")
		require.NoError(t, err)
		ref, err := url.Parse(loc)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(base.ResolveReference(ref).Path, "/console/"), "where a browser goes: %s", loc)
	}

	rec = serve(h, http.MethodGet, "/console/assets/", randomAddr(), nil)
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.NotContains(t, rec.Body.String(), `href="console.css"`, "no listing")
	require.Equal(t, http.StatusOK, serve(h, http.MethodGet, "/console/assets/console.css", randomAddr(), nil).Code)
}

// TestTrustedProxy: behind a TLS proxy the operator trusts, the cookie is
// Secure and the login limit counts the client the proxy names; the same
// headers from any other peer change nothing.
func TestTrustedProxy(t *testing.T) {
	fx := newFixture(t)
	proxies, err := api.ParseProxies("127.0.0.1/32, ::1")
	require.NoError(t, err)
	h := proxies.Wrap(fx.console.Handler())

	rec := serve(h, http.MethodPost, "/console/login", "127.0.0.1:5000", url.Values{"api_key": {fx.key}},
		"X-Forwarded-Proto", "https", "X-Forwarded-For", "127.0.0.1")
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Contains(t, rec.Header().Get("Set-Cookie"), "Secure", "the client used HTTPS to the proxy")
	rec = serve(fx.console.Handler(), http.MethodPost, "/console/login", "127.0.0.1:5000", url.Values{"api_key": {fx.key}},
		"X-Forwarded-Proto", "https", "X-Forwarded-For", "127.0.0.1")
	require.NotContains(t, rec.Header().Get("Set-Cookie"), "Secure", "no trusted proxies: the header is ignored")

	// Two clients behind the proxy are counted apart; a client that sends
	// its own X-Forwarded-For is counted under its own address.
	client := randomAddr()
	clientIP := strings.TrimSuffix(strings.TrimPrefix(client[:strings.LastIndex(client, ":")], "["), "]")
	wrong := func(peer string, header ...string) int {
		return serve(h, http.MethodPost, "/console/login", peer, url.Values{"api_key": {"cl_guess"}}, header...).Code
	}
	for range console.DefaultLoginFailures {
		require.Equal(t, http.StatusUnauthorized, wrong("127.0.0.1:5000", "X-Forwarded-For", clientIP))
	}
	require.Equal(t, http.StatusTooManyRequests, wrong("127.0.0.1:5000", "X-Forwarded-For", clientIP))
	require.Equal(t, http.StatusUnauthorized, wrong("127.0.0.1:5000", "X-Forwarded-For", strings.Split(randomAddr()[1:], "]")[0]), "another client")
	require.Equal(t, http.StatusTooManyRequests, wrong(client, "X-Forwarded-For", "203.0.113.9"), "an untrusted peer's header is ignored")
}
