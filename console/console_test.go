package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLogin(t *testing.T) {
	fx := newFixture(t)
	c := fx.browser(t)

	// Not logged in: sent to the login form, which asks for the key.
	a := fx.get(t, c, "/console/actions?status=FAIL")
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "/console/login?next=%2Fconsole%2Factions%3Fstatus%3DFAIL", a.header.Get("Location"))
	a = fx.get(t, c, "/console/login")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, `<label for="api_key">`)
	require.Contains(t, a.body, `name="api_key" type="password"`)
	require.Equal(t, http.StatusMovedPermanently, fx.get(t, c, "/console").status)

	// A wrong key: 401, no session.
	a = fx.post(t, c, "/console/login", url.Values{"api_key": {"cl_wrong"}})
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.Contains(t, a.body, "not a tenant&#39;s API key")
	require.NotContains(t, a.body, "cl_wrong", "the key typed is not echoed")
	require.Empty(t, a.header.Values("Set-Cookie"))
	a = fx.post(t, c, "/console/login", url.Values{"api_key": {""}})
	require.Equal(t, http.StatusBadRequest, a.status)

	// The right key: a session cookie as the issue asks, and to next.
	a = fx.post(t, c, "/console/login", url.Values{"api_key": {fx.key}, "next": {"/console/actions?status=FAIL"}})
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "/console/actions?status=FAIL", a.header.Get("Location"))
	ck := a.header.Get("Set-Cookie")
	require.Contains(t, ck, "commitlayer_console=")
	require.Contains(t, ck, "HttpOnly")
	require.Contains(t, ck, "SameSite=Strict")
	require.Contains(t, ck, "Path=/console/")
	require.NotContains(t, ck, "Secure", "over loopback (http://127.0.0.1) the cookie goes without Secure")
	a = fx.get(t, c, "/console/")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, fx.tenant.Name)
	a = fx.get(t, c, "/console/login")
	require.Equal(t, http.StatusSeeOther, a.status, "logged in: the form sends on")

	// A next that leaves the console is not followed.
	for _, next := range []string{"https://evil.example/", "//evil.example/console/", "/v1/actions", "/console/\\evil"} {
		a = fx.post(t, fx.browser(t), "/console/login", url.Values{"api_key": {fx.key}, "next": {next}})
		require.Equal(t, "/console/", a.header.Get("Location"), next)
	}

	// Not on loopback (a request through a proxy or from afar): Secure.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(url.Values{"api_key": {fx.key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr = "203.0.113.7:50000"
	fx.console.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Contains(t, rec.Header().Get("Set-Cookie"), "Secure")

	fx.noKeyAnywhere(t)
}

func TestLoginRateLimit(t *testing.T) {
	fx := newFixture(t)
	try := func(ip, key string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(url.Values{"api_key": {key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = ip + ":4000"
		fx.console.Handler().ServeHTTP(rec, req)
		return rec
	}
	// Addresses of the test's own: the counts live in the shared database.
	one, two := strings.TrimSuffix(randomAddr(), ":4000"), strings.TrimSuffix(randomAddr(), ":4000")
	require.Equal(t, http.StatusSeeOther, try(one, fx.key).Code, "a right key does not count")
	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, try(one, "cl_guess").Code, "wrong key %d", i+1)
	}
	rec := try(one, "cl_guess")
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "the sixth wrong key in a minute")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Equal(t, http.StatusTooManyRequests, try(one, fx.key).Code, "blocked: not even the right key is tried")
	require.Equal(t, http.StatusSeeOther, try(two, fx.key).Code, "another address is not blocked")
	// A minute later the window has passed.
	fx.setClock(fx.now.Add(61 * time.Second))
	require.Equal(t, http.StatusSeeOther, try(one, fx.key).Code)
}

func TestCSRFAndLogout(t *testing.T) {
	fx := newFixture(t)
	c := fx.browser(t)
	fx.login(t, c)
	a := fx.get(t, c, "/console/actions/"+fx.failID)
	require.Equal(t, http.StatusOK, a.status)
	token := csrf(t, a.body)
	path := "/console/actions/" + fx.failID + "/recheck"

	for name, form := range map[string]url.Values{"no token": {}, "wrong token": {"csrf": {"x" + token}}} {
		a = fx.post(t, c, path, form)
		require.Equal(t, http.StatusForbidden, a.status, name)
	}
	a = fx.post(t, c, path, url.Values{"csrf": {token}}, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, a.status, "another site's form")
	a = fx.post(t, c, path, url.Values{"csrf": {token}}, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, a.status)
	// Another session's token is refused too.
	other := fx.browser(t)
	fx.login(t, other)
	otherToken := csrf(t, fx.get(t, other, "/console/").body)
	require.NotEqual(t, token, otherToken)
	require.Equal(t, http.StatusForbidden, fx.post(t, c, path, url.Values{"csrf": {otherToken}}).status)
	require.Empty(t, fx.ver.calls(), "nothing was rechecked")
	// Without a session a POST is refused, not redirected.
	require.Equal(t, http.StatusUnauthorized, fx.post(t, fx.browser(t), path, url.Values{"csrf": {token}}).status)

	a = fx.post(t, c, path, url.Values{"csrf": {token}}, "Origin", fx.srv.URL)
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "/console/actions/"+fx.failID+"?notice=rechecked", a.header.Get("Location"))
	require.Equal(t, []string{fx.tenant.ID + "/" + fx.failID}, fx.ver.calls())
	require.Contains(t, fx.get(t, c, a.header.Get("Location")).body, "Re-verified just now")

	// Logout needs the token, then ends the session.
	require.Equal(t, http.StatusForbidden, fx.post(t, c, "/console/logout", url.Values{}).status)
	a = fx.post(t, c, "/console/logout", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Contains(t, a.header.Get("Set-Cookie"), "Max-Age=0")
	require.Equal(t, http.StatusSeeOther, fx.get(t, c, "/console/").status, "logged out")
	require.Equal(t, http.StatusOK, fx.get(t, other, "/console/").status, "the other session lives on")
	fx.noKeyAnywhere(t)
}

func TestSessionExpires(t *testing.T) {
	fx := newFixture(t)
	c := fx.browser(t)
	fx.login(t, c)
	fx.setClock(fx.now.Add(11 * time.Hour))
	require.Equal(t, http.StatusOK, fx.get(t, c, "/console/").status, "used within 12h")
	fx.setClock(fx.now.Add(22 * time.Hour))
	require.Equal(t, http.StatusOK, fx.get(t, c, "/console/").status, "idle 11h: still alive")
	fx.setClock(fx.now.Add(35 * time.Hour))
	require.Equal(t, http.StatusSeeOther, fx.get(t, c, "/console/").status, "idle 13h: ended")
}

func TestPages(t *testing.T) {
	fx := newFixture(t)
	c := fx.browser(t)
	fx.login(t, c)

	pages := map[string][]string{
		"/console/": {"Verdicts over time", "<svg", "Latest FAILs", fx.failID, "Open provisional verdicts",
			"Awaiting a first verdict", "Orphans", "crm", "timeout", "payout-bot", "refund_customer"},
		"/console/actions?status=FAIL": {fx.failID, `<option value="FAIL" selected>`, "status-fail"},
		"/console/actions/" + fx.failID: {fx.failID, "status-fail", failMessage, "effect_differs", "outcome lens",
			"ledger-po-7", `{&#34;amount&#34;:2400,&#34;currency&#34;:&#34;USD&#34;}`, "What to do:", "paid out",
			"send_payout v2", "stage-provisional", "stage-reversed",
			"http://temporal-ui.example:8233/namespaces/default/workflows/verify%2F" + fx.tenant.ID + "%2F" + fx.failID,
			`action="/console/actions/` + fx.failID + `/recheck"`},
		"/console/contracts":                       {"send_payout", "refund_customer", "?version=1"},
		"/console/contracts/send_payout":           {"watch: 2h", "(latest)"},
		"/console/contracts/send_payout?version=1": {"watch: 1h", "v1"},
		"/console/webhooks": {"wh_console", "https://hooks.example.com/commitlayer", "delivered", "failing", "http 503",
			"the previous secret signs too until"},
	}
	for path, wants := range pages {
		a := fx.get(t, c, path)
		require.Equal(t, http.StatusOK, a.status, path)
		require.Equal(t, "text/html; charset=utf-8", a.header.Get("Content-Type"), path)
		csp := a.header.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'self'", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.Equal(t, "DENY", a.header.Get("X-Frame-Options"))
		require.NotContains(t, a.body, "<script", "%s: no script at all", path)
		require.NotContains(t, a.body, "style=", "%s: no inline style (the CSP refuses it)", path)
		require.NotContains(t, a.body, "sealed-not-shown", path)
		require.NotContains(t, a.body, "sealed-new-not-shown", path)
		require.Contains(t, a.body, `<main id="main">`, path)
		require.Contains(t, a.body, `<html lang="en">`, path)
		for _, w := range wants {
			require.Contains(t, a.body, w, path)
		}
	}
	// Filters: only FAIL lists no PASS; pending; bad values name the field.
	fails := fx.get(t, c, "/console/actions?status=FAIL").body
	require.NotContains(t, fails, fx.passID)
	require.NotContains(t, fails, "status-pass")
	pending := fx.get(t, c, "/console/actions?status=pending&contract=&agent=&since=&until=").body
	require.Contains(t, pending, "status-pending")
	require.NotContains(t, pending, "status-fail")
	a := fx.get(t, c, "/console/actions?status=MAYBE")
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, a.body, "status: must be PASS, FAIL, UNKNOWN or pending")
	since := fx.now.Add(-100 * time.Minute).Format("2006-01-02T15:04")
	a = fx.get(t, c, "/console/actions?agent=payout-bot&since="+since)
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, fx.passID, "datetime-local values are read as UTC")
	require.NotContains(t, a.body, fx.failID, "requested before since")
	// Pages: a small page has a next link that continues the list.
	a = fx.get(t, c, "/console/actions?limit=2")
	require.Contains(t, a.body, `rel="next"`)
	require.Equal(t, http.StatusNotFound, fx.get(t, c, "/console/actions/act_nope").status)
	require.Equal(t, http.StatusNotFound, fx.get(t, c, "/console/contracts/nope").status)
	require.Equal(t, http.StatusBadRequest, fx.get(t, c, "/console/contracts/send_payout?version=x").status)
	require.Equal(t, http.StatusNotFound, fx.get(t, c, "/console/nope").status)
	// Assets are served with their types.
	a = fx.get(t, c, "/console/assets/console.css")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.header.Get("Content-Type"), "text/css")

	// Another tenant's action is not this tenant's.
	other, _, err := fx.db.CreateTenant(t.Context(), "other")
	require.NoError(t, err)
	_ = other
	fx.noKeyAnywhere(t)
}

// The "done when": GET /v1/actions?status=FAIL lists the failed
// action, and so does the console after a login with the key.
func TestAPIAndConsoleAgree(t *testing.T) {
	fx := newFixture(t)
	req, err := http.NewRequest(http.MethodGet, fx.srv.URL+"/v1/actions?status=FAIL", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fx.key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	a := read(t, res)
	require.Equal(t, http.StatusOK, a.status, a.body)
	var list struct {
		Actions []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"actions"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &list))
	require.Len(t, list.Actions, 1)
	require.Equal(t, fx.failID, list.Actions[0].ID)
	require.Equal(t, "FAIL", list.Actions[0].Status)

	c := fx.browser(t)
	fx.login(t, c)
	page := fx.get(t, c, "/console/actions?status=FAIL").body
	require.Contains(t, page, `<a href="/console/actions/`+fx.failID+`">`+fx.failID+`</a>`)
	require.Contains(t, page, `<span class="badge status-fail">FAIL</span>`)
	fx.noKeyAnywhere(t)
}

// TestFailedStartShown: an action whose start Temporal refused for good
// says so on its page, with the reason, instead of "no verdict yet".
func TestFailedStartShown(t *testing.T) {
	fx := newFixture(t)
	c := fx.browser(t)
	fx.login(t, c)
	a := fx.get(t, c, "/console/actions/"+fx.failedStartID)
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, "Verification failed to start")
	require.Contains(t, a.body, startRefusal)
	require.NotContains(t, a.body, "has not stored its first one")
	require.NotContains(t, a.body, "Re-verify now", "nothing to re-verify: it never started")
}

// The fixture's actions stand for verifications under way (and one whose
// start was refused): none is a pending start. The run's test database is
// shared by every test process, and another process's reconciler would
// start a real verification for a pending one and give it a verdict of its
// own — the FAIL filter then lists more than the fixture's one FAIL.
func TestFixtureLeavesNoPendingStart(t *testing.T) {
	fx := newFixture(t)
	pending, err := fx.db.PendingStarts(t.Context(), 0, 100000)
	require.NoError(t, err)
	for _, p := range pending {
		require.NotEqual(t, fx.tenant.ID, p.TenantID, "action %s is a pending start", p.ID)
	}
}
