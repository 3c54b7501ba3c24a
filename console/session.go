package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/api"
)

// CookieName is the session cookie's name.
const CookieName = "commitlayer_console"

// session is one logged-in browser. Sessions live in the store, kept by
// the SHA-256 of their token, so every API process serves them.
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

// sessionOf returns the request's live session (extending it), or nil.
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

// setSessionCookie sets a browser-session cookie (no Max-Age: the server
// ends sessions), or clears it for "". It lacks Secure only over plain
// HTTP from loopback (development).
func (c *Console) setSessionCookie(w http.ResponseWriter, r *http.Request, id string) {
	ip := net.ParseIP(api.ClientAddr(r))
	ck := &http.Cookie{Name: CookieName, Value: id, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: api.HTTPS(r) || ip == nil || !ip.IsLoopback()}
	if id == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}

// crossOrigin refuses a state-changing request another site's page sent
// (Sec-Fetch-Site, else Origin); requests with neither (curl) are left to
// the CSRF token.
var crossOrigin = http.NewCrossOriginProtection()

func sameOrigin(r *http.Request) bool { return crossOrigin.Check(r) == nil }

// authed passes requests with a live session to h; others go to the login
// page (GET) or are refused (POST). POSTs must come from this site with the
// session's CSRF token (compared in constant time).
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session) error) http.HandlerFunc {
	return c.serve(func(w http.ResponseWriter, r *http.Request) error {
		se, err := c.sessionOf(r)
		switch {
		case err != nil:
			return err
		case se == nil && r.Method == http.MethodGet:
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil
		case se == nil:
			p := page{Title: "Logged out", Problem: "Your session has ended; log in again."}
			return c.render(w, http.StatusUnauthorized, "error", p)
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
			got := r.PostFormValue("csrf")
			if !sameOrigin(r) || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) != 1 {
				return c.render(w, http.StatusForbidden, "error", se.page("Refused", "",
					"This form is out of date or came from another site; reload the page and try again.", nil))
			}
		}
		return h(w, r, se)
	})
}

func (se *session) page(title, nav, problem string, data any) page {
	return page{Title: title, Nav: nav, Tenant: se.tenant.Name, CSRF: se.csrf, Problem: problem, Data: data}
}
