package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/api"
)

// CookieName is the session cookie's name.
const CookieName = "commitlayer_console"

// session is one logged-in browser: the tenant it acts for and its CSRF
// token. Sessions live in the store (kept by the SHA-256 of their token),
// so every API process serves them; the API key a session logged in with
// is not kept.
type session struct {
	tenant commitlayer.Tenant
	csrf   string
}

func token() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// csrfOf derives a session's CSRF token from its id: the same in every
// process, stored nowhere, and no way back to the id.
func csrfOf(id string) string {
	h := sha256.Sum256([]byte("commitlayer console csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// validCSRF compares a form's token with the session's in constant time.
func validCSRF(se *session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}

// sessionOf returns the request's live session (extending it), nil when it
// has none; err only when the store failed.
func (c *Console) sessionOf(r *http.Request) (*session, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	now := c.now()
	t, err := c.cfg.Store.Session(r.Context(), ck.Value, now, now.Add(c.cfg.SessionIdle))
	if errors.Is(err, commitlayer.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &session{tenant: t, csrf: csrfOf(ck.Value)}, nil
}

// onLoopback reports whether the client is on loopback (the cookie may
// then go without Secure, for http://127.0.0.1 during development).
func onLoopback(r *http.Request) bool {
	ip := net.ParseIP(api.ClientAddr(r))
	return ip != nil && ip.IsLoopback()
}

// setSessionCookie sets a browser-session cookie (no Max-Age: the server
// ends the session when it idles or ages out, however long the browser
// keeps the cookie, and a cookie that outlived its session logs in again).
// An empty id clears it.
func (c *Console) setSessionCookie(w http.ResponseWriter, r *http.Request, id string) {
	ck := &http.Cookie{Name: CookieName, Value: id, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: api.HTTPS(r) || !onLoopback(r)}
	if id == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}

// crossOrigin refuses a state-changing request another site's page sent
// (Sec-Fetch-Site, else Origin against Host; Origin: null is another
// site's, a sandboxed frame's). Requests with neither (curl, old
// browsers) pass to the CSRF token check.
var crossOrigin = http.NewCrossOriginProtection()

func sameOrigin(r *http.Request) bool { return crossOrigin.Check(r) == nil }

// authed passes requests with a live session to h; others are sent to the
// login page (GET) or refused (POST). POSTs must carry the session's CSRF
// token in the csrf field and come from this site.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se, err := c.sessionOf(r)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if se == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.render(w, r, http.StatusUnauthorized, "error", page{Title: "Logged out", Problem: "Your session has ended; log in again."})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
			if !sameOrigin(r) || !validCSRF(se, r.PostFormValue("csrf")) {
				c.render(w, r, http.StatusForbidden, "error", page{Title: "Refused", Tenant: se.tenant.Name, CSRF: se.csrf,
					Problem: "This form is out of date or came from another site; reload the page and try again."})
				return
			}
		}
		h(w, r, se)
	}
}
