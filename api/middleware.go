package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/realclientip/realclientip-go"
)

type ctxKey int

const (
	ctxRequestID ctxKey = iota
	ctxTenant
	ctxLogFields
)

func requestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(ctxRequestID).(string)
	return id
}

// logFields carry what auth learns (the tenant) out to the request's log
// line. One request, one goroutine: no lock needed.
type logFields struct {
	tenant string
}

func loggedTenant(ctx context.Context) string {
	if f, ok := ctx.Value(ctxLogFields).(*logFields); ok {
		return f.tenant
	}
	return ""
}

func withTenant(ctx context.Context, t commitlayer.Tenant) context.Context {
	if f, ok := ctx.Value(ctxLogFields).(*logFields); ok {
		f.tenant = t.ID
	}
	return context.WithValue(ctx, ctxTenant, t)
}

func tenantOf(ctx context.Context) commitlayer.Tenant {
	t, _ := ctx.Value(ctxTenant).(commitlayer.Tenant)
	return t
}

// requestID keeps the caller's X-Request-Id when it is a short token, or
// makes one, and answers it.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(r.Context(), ctxRequestID, id)
		ctx = context.WithValue(ctx, ctxLogFields, &logFields{})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func validRequestID(id string) bool {
	return id != "" && len(id) <= 64 && !strings.ContainsFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	})
}

// statusRecorder remembers the status written (200 until one is).
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusRecorder) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	facts    *prometheus.CounterVec
	actions  *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	return &httpMetrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commitlayer_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"})),
		latency: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "commitlayer_http_request_duration_seconds",
			Help:    "HTTP request latency, by route pattern and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "code"})),
		facts: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commitlayer_facts_ingested_total",
			Help: "Facts received on POST /v1/facts, by result (inserted, duplicate).",
		}, []string{"result"})),
		actions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commitlayer_actions_recorded_total",
			Help: "Actions recorded on POST /v1/actions, by result (created, replayed).",
		}, []string{"result"})),
	}
}

// register registers c, or returns the collector already registered under
// the same description (two servers on one registry share the metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("api: register metric: %v", err))
	}
	return c
}

// instrument counts, times and logs requests under their route pattern,
// and turns a panic into a logged 500.
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start, rec := time.Now(), &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			p := recover()
			if p != nil && p != http.ErrAbortHandler { //nolint:errorlint // the sentinel is compared, as net/http does
				s.log.ErrorContext(r.Context(), "panic in handler", "panic", fmt.Sprint(p),
					"request_id", requestIDOf(r.Context()), "method", r.Method, "path", r.URL.Path,
					"stack", string(debug.Stack()))
				if !rec.wrote {
					s.writeError(rec, r, errorf(http.StatusInternalServerError, codeInternal, "internal error"))
				}
			}
			status := rec.status
			if p != nil {
				status = http.StatusInternalServerError
			}
			elapsed := time.Since(start)
			code := strconv.Itoa(status)
			s.metrics.requests.WithLabelValues(route, code).Inc()
			s.metrics.latency.WithLabelValues(route, code).Observe(elapsed.Seconds())
			level := slog.LevelInfo
			if route == "GET /metrics" || route == "GET /healthz" {
				level = slog.LevelDebug
			}
			s.log.Log(r.Context(), level, "http request", "request_id", requestIDOf(r.Context()),
				"method", r.Method, "route", route, "path", r.URL.Path, "status", status,
				"duration_ms", float64(elapsed.Microseconds())/1000, "tenant", loggedTenant(r.Context()))
			if p == http.ErrAbortHandler { //nolint:errorlint // as above
				panic(p)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

type authLevel int

const (
	authNone authLevel = iota
	authTenant
	authAdmin
)

// bearer returns the token of "Authorization: Bearer <token>".
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

func (s *Server) isAdminKey(key string) bool {
	return s.adminKey != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.adminKey)) == 1
}

// authorize checks the key the route's level requires and returns r with
// a tenant route's tenant: 401 for a missing or unknown key (and the admin
// key on a tenant route), 403 for a tenant key on an admin route.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, auth authLevel) (*http.Request, error) {
	unauthorized := func(msg string) (*http.Request, error) {
		return nil, errorf(http.StatusUnauthorized, codeUnauthorized, "%s", msg)
	}
	if auth == authNone {
		return r, nil
	}
	who := "API"
	if auth == authAdmin {
		who = "admin"
	}
	key, ok := bearer(r)
	if !ok {
		return unauthorized("missing bearer " + who + " key")
	}
	t, admin, err := s.authenticate(w, r, key)
	switch {
	case isNotFound(err):
		return unauthorized("invalid " + who + " key")
	case err != nil:
		return nil, err
	case auth == authAdmin && !admin:
		return nil, errorf(http.StatusForbidden, codeForbidden, "admin routes need the admin key, not a tenant key")
	case auth == authTenant && admin:
		return unauthorized("the admin key is not a tenant API key")
	case auth == authTenant:
		return r.WithContext(withTenant(r.Context(), t)), nil
	}
	return r, nil
}

// KeyLimiter counts wrong bearer keys per client address in the database,
// so every API process shares the count; *postgres.DB has it.
type KeyLimiter interface {
	// TenantByAPIKeyLimited is TenantByAPIKey that also says until when
	// limitKey has max or more hits (zero when fewer).
	TenantByAPIKeyLimited(ctx context.Context, key, limitKey string, max int, now time.Time) (commitlayer.Tenant, time.Time, error)
	// Hit counts one event under key in its window (one statement, so a
	// burst gets distinct counts) and returns the count and the window's end.
	Hit(ctx context.Context, key string, window time.Duration, now time.Time) (int, time.Time, error)
}

// DefaultKeyFailures is how many wrong bearer keys one client address may
// send a minute; past it every key from it is 429 until the minute ends.
const DefaultKeyFailures = 10

// authenticate tells the admin key, a tenant's key and neither (wrapping
// commitlayer.ErrNotFound). With a KeyLimiter a wrong key counts against
// LimitAddr, and an address past keyFailures a minute is 429 whatever its
// key, the admin key included; counted atomically, so even a burst gets at
// most keyFailures 401s a minute.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, key string) (commitlayer.Tenant, bool, error) {
	ctx, admin := r.Context(), s.isAdminKey(key)
	if s.keyLimiter == nil {
		if admin {
			return commitlayer.Tenant{}, true, nil
		}
		t, err := s.store.TenantByAPIKey(ctx, key)
		return t, false, wrapAuth(err)
	}
	now, lk := s.now(), "bearer:"+LimitAddr(r)
	t, blocked, err := s.keyLimiter.TenantByAPIKeyLimited(ctx, key, lk, s.keyFailures, now)
	switch {
	case !blocked.IsZero():
		return commitlayer.Tenant{}, false, s.tooManyKeys(w, blocked.Sub(now))
	case admin:
		return commitlayer.Tenant{}, true, nil
	case isNotFound(err):
		n, until, herr := s.keyLimiter.Hit(ctx, lk, time.Minute, now)
		if herr != nil {
			return t, false, fmt.Errorf("count wrong key: %w", herr)
		}
		if n > s.keyFailures {
			return t, false, s.tooManyKeys(w, until.Sub(now))
		}
	}
	return t, false, wrapAuth(err)
}

func wrapAuth(err error) error {
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("authenticate: %w", err)
	}
	return err
}

func (s *Server) tooManyKeys(w http.ResponseWriter, wait time.Duration) error {
	secs := RetryAfter(wait)
	w.Header().Set("Retry-After", secs)
	return errorf(http.StatusTooManyRequests, codeTooManyKeys,
		"too many wrong API keys from your address; retry in %s s", secs)
}

// RetryAfter is a Retry-After value: whole seconds, at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// ClientAddr is the request's client address: the peer, or the client a
// trusted proxy named (Proxies.Wrap).
func ClientAddr(r *http.Request) string {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap().WithZone("").String()
	}
	return r.RemoteAddr
}

// LimitAddr is what per-address limits count: ClientAddr, or the /64 of
// an IPv6 one (a site gets a /64 and may use any address in it).
func LimitAddr(r *http.Request) string {
	a, err := netip.ParseAddr(ClientAddr(r))
	if err != nil || !a.Is6() {
		return ClientAddr(r)
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// Proxies are the peers whose proxy headers are believed
// (COMMITLAYER_TRUSTED_PROXIES): X-Forwarded-For (its rightmost untrusted
// address) and X-Forwarded-Proto. Any other peer's are ignored.
type Proxies struct {
	ranges []net.IPNet
	xff    realclientip.RightmostTrustedRangeStrategy
}

// ParseProxies reads addresses and CIDR ranges separated by commas or
// spaces; empty means none (nil).
func ParseProxies(s string) (*Proxies, error) {
	list := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	if len(list) == 0 {
		return nil, nil
	}
	ranges, err := realclientip.AddressesAndRangesToIPNets(list...)
	if err != nil {
		return nil, fmt.Errorf("trusted proxies: %w", err)
	}
	xff, err := realclientip.NewRightmostTrustedRangeStrategy("X-Forwarded-For", ranges)
	if err != nil {
		return nil, fmt.Errorf("trusted proxies: %w", err)
	}
	return &Proxies{ranges: ranges, xff: xff}, nil
}

type ctxHTTPS struct{}

// Wrap serves h with trusted peers' proxy headers applied to RemoteAddr
// and HTTPS. A nil Proxies trusts no one.
func (p *Proxies) Wrap(h http.Handler) http.Handler {
	if p == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := net.ParseIP(ClientAddr(r))
		if peer == nil || !slices.ContainsFunc(p.ranges, func(n net.IPNet) bool { return n.Contains(peer) }) {
			h.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		if ip := p.xff.ClientIP(r.Header, r.RemoteAddr); ip != "" {
			r2.RemoteAddr = net.JoinHostPort(ip, "0")
		}
		proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
		if strings.EqualFold(strings.TrimSpace(proto), "https") {
			r2 = r2.WithContext(context.WithValue(r2.Context(), ctxHTTPS{}, true))
		}
		h.ServeHTTP(w, r2)
	})
}

// HTTPS reports whether the client used HTTPS, to us or a trusted proxy.
func HTTPS(r *http.Request) bool {
	return r.TLS != nil || r.Context().Value(ctxHTTPS{}) != nil
}
