package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
)

// CookieName is the session cookie's name.
const CookieName = "commitlayer_console"

// session is one logged-in browser: the tenant it acts for and its CSRF
// token. The API key it logged in with is not kept.
type session struct {
	tenant  commitlayer.Tenant
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions keeps the sessions in this process's memory, keyed by the
// SHA-256 of their id (a dump of the map does not hand out live ids). A
// restart logs everyone out; several API processes behind one address
// need sticky routing for the console.
type sessions struct {
	mu        sync.Mutex
	m         map[[32]byte]*session
	idle, max time.Duration
	limit     int
}

func newSessions(idle, max time.Duration, limit int) *sessions {
	return &sessions{m: map[[32]byte]*session{}, idle: idle, max: max, limit: limit}
}

func token() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func sessionKey(id string) [32]byte { return sha256.Sum256([]byte(id)) }

// create starts a session for t and returns its id.
func (s *sessions) create(t commitlayer.Tenant, now time.Time) (string, *session) {
	id := token()
	se := &session{tenant: t, csrf: token(), created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.limit {
		s.sweepLocked(now)
	}
	for len(s.m) >= s.limit { // still full: the least recently seen goes
		var oldest [32]byte
		first := true
		for k, v := range s.m {
			if first || v.seen.Before(s.m[oldest].seen) {
				oldest, first = k, false
			}
		}
		delete(s.m, oldest)
	}
	s.m[sessionKey(id)] = se
	return id, se
}

// get returns the live session of id and marks it seen, nil when there
// is none or it expired (then it is dropped).
func (s *sessions) get(id string, now time.Time) *session {
	if id == "" {
		return nil
	}
	k := sessionKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.m[k]
	if !ok {
		return nil
	}
	if s.expired(se, now) {
		delete(s.m, k)
		return nil
	}
	se.seen = now
	return se
}

func (s *sessions) expired(se *session, now time.Time) bool {
	return now.Sub(se.seen) > s.idle || now.Sub(se.created) > s.max
}

func (s *sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sessionKey(id))
}

func (s *sessions) sweepLocked(now time.Time) {
	for k, se := range s.m {
		if s.expired(se, now) {
			delete(s.m, k)
		}
	}
}

// validCSRF compares a form's token with the session's in constant time.
func validCSRF(se *session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}

// limiter counts wrong keys per client address in a sliding window.
type limiter struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	fails  map[string][]time.Time
}

func newLimiter(max int, window time.Duration) *limiter {
	return &limiter{max: max, window: window, fails: map[string][]time.Time{}}
}

// blocked reports whether ip has used up its failures, and when the
// oldest of them leaves the window.
func (l *limiter) blocked(ip string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs := l.recentLocked(ip, now)
	if len(fs) < l.max {
		return false, 0
	}
	return true, fs[0].Add(l.window).Sub(now)
}

// fail records a wrong key from ip.
func (l *limiter) fail(ip string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.fails) > 10000 { // bounded: forget addresses whose window passed
		for k := range l.fails {
			if len(l.recentLocked(k, now)) == 0 {
				delete(l.fails, k)
			}
		}
	}
	l.fails[ip] = append(l.recentLocked(ip, now), now)
}

func (l *limiter) recentLocked(ip string, now time.Time) []time.Time {
	fs := l.fails[ip]
	i := 0
	for i < len(fs) && now.Sub(fs[i]) >= l.window {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(l.fails, ip)
		return nil
	}
	l.fails[ip] = fs
	return fs
}

// clientIP is the address the request came from (the connection's peer:
// a proxy in front should be the one limiting, or pass one address per
// client).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// onLoopback reports whether the request came over loopback (the cookie
// may then go without Secure, for http://127.0.0.1 during development).
func onLoopback(r *http.Request) bool {
	ip := net.ParseIP(clientIP(r))
	return ip != nil && ip.IsLoopback()
}

// setSessionCookie sets a browser-session cookie (no Max-Age: the server
// ends the session when it idles or ages out, however long the browser
// keeps the cookie, and a cookie that outlived its session logs in again).
func (c *Console) setSessionCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || !onLoopback(r),
	})
}

func (c *Console) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || !onLoopback(r), MaxAge: -1})
}

// sameOrigin refuses a state-changing request another site's page sent:
// when the browser says where it comes from (Sec-Fetch-Site, Origin), it
// must be this site. Requests without either (curl, old browsers) pass to
// the CSRF token check.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		// Behind a TLS proxy the scheme differs; the host must not.
		return o == scheme+"://"+r.Host || o == "https://"+r.Host
	}
	return true
}

// authed passes requests with a live session to h; others are sent to the
// login page (GET) or refused (POST). POSTs must carry the session's CSRF
// token in the csrf field and come from this site.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var id string
		if ck, err := r.Cookie(CookieName); err == nil {
			id = ck.Value
		}
		se := c.sessions.get(id, c.now())
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

func retryAfter(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.Itoa(s)
}
