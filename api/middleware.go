package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/prometheus/client_golang/prometheus"
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

// logFields are what a request's log line names that is only known deeper
// in the chain: auth sets the tenant on the holder the outer middleware
// put in the context, and the request line (written on the way out) reads
// it. One request, one goroutine: no lock needed.
type logFields struct {
	tenant string
}

func logFieldsOf(ctx context.Context) *logFields {
	f, _ := ctx.Value(ctxLogFields).(*logFields)
	return f
}

// withTenant puts the authenticated tenant in the context and names it on
// the request's log line.
func withTenant(ctx context.Context, t commitlayer.Tenant) context.Context {
	if f := logFieldsOf(ctx); f != nil {
		f.tenant = t.ID
	}
	return context.WithValue(ctx, ctxTenant, t)
}

func tenantOf(ctx context.Context) commitlayer.Tenant {
	t, _ := ctx.Value(ctxTenant).(commitlayer.Tenant)
	return t
}

// requestID takes the caller's X-Request-Id when it is a short token, or
// makes one, and returns it in X-Request-Id.
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
		if logFieldsOf(ctx) == nil {
			ctx = context.WithValue(ctx, ctxLogFields, &logFields{})
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// recoverer turns a panic into a logged 500 (when nothing was written yet).
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler { //nolint:errorlint // the sentinel is compared, as net/http does
				panic(p)
			}
			s.log.ErrorContext(r.Context(), "panic in handler", "panic", fmt.Sprint(p),
				"request_id", requestIDOf(r.Context()), "method", r.Method, "path", r.URL.Path,
				"stack", string(debug.Stack()))
			if !rec.wrote {
				s.writeError(rec, r, errorf(http.StatusInternalServerError, codeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// statusRecorder remembers the status written.
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
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// httpMetrics are the API's own metrics.
type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	facts    *prometheus.CounterVec
	actions  *prometheus.CounterVec
	// noticesDeferred counts notices of new facts left to the reconciler
	// because maxBackgroundNotices were being delivered.
	noticesDeferred prometheus.Counter
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
		noticesDeferred: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commitlayer_fact_notices_deferred_total",
			Help: "Notices of new facts left in the outbox for the reconciler: too many were being delivered already.",
		})),
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
		panic(fmt.Sprintf("api: register metric: %v", err)) // a programming error: names are constants
	}
	return c
}

// instrument counts and times requests under their route pattern and logs
// one line per request.
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec, ok := w.(*statusRecorder)
		if !ok {
			rec = &statusRecorder{ResponseWriter: w}
		}
		panicked := true
		defer func() {
			status := rec.status
			switch {
			case panicked: // the panic goes on to the recoverer, which answers 500
				status = http.StatusInternalServerError
			case !rec.wrote:
				status = http.StatusOK
			}
			elapsed := time.Since(start)
			code := strconv.Itoa(status)
			s.metrics.requests.WithLabelValues(route, code).Inc()
			s.metrics.latency.WithLabelValues(route, code).Observe(elapsed.Seconds())
			level := slog.LevelInfo
			if route == "GET /metrics" || route == "GET /healthz" {
				level = slog.LevelDebug
			}
			tenant := tenantOf(r.Context()).ID
			if f := logFieldsOf(r.Context()); f != nil && f.tenant != "" {
				tenant = f.tenant // set by auth, deeper in the chain
			}
			s.log.Log(r.Context(), level, "http request", "request_id", requestIDOf(r.Context()),
				"method", r.Method, "route", route, "path", r.URL.Path, "status", status,
				"duration_ms", float64(elapsed.Microseconds())/1000, "tenant", tenant)
		}()
		next.ServeHTTP(rec, r)
		panicked = false
	})
}

// authLevel is the credential a route requires.
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

// tenantOnlyWith resolves the tenant from its key. A missing or unknown
// key, and the admin key, are 401, answered by fail (writeError, or a
// route's own error shape, as OTLP's).
func (s *Server) tenantOnlyWith(next http.Handler, fail func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := bearer(r)
		if !ok {
			fail(w, r, errorf(http.StatusUnauthorized, codeUnauthorized, "missing bearer API key"))
			return
		}
		if s.isAdminKey(key) {
			fail(w, r, errorf(http.StatusUnauthorized, codeUnauthorized, "the admin key is not a tenant API key"))
			return
		}
		t, err := s.tenants.TenantByAPIKey(r.Context(), key)
		if isNotFound(err) {
			fail(w, r, errorf(http.StatusUnauthorized, codeUnauthorized, "invalid API key"))
			return
		}
		if err != nil {
			fail(w, r, fmt.Errorf("authenticate tenant: %w", err))
			return
		}
		next.ServeHTTP(w, r.WithContext(withTenant(r.Context(), t)))
	})
}

// adminOnly admits the admin key. A tenant's key is 403; a missing or
// unknown key is 401.
func (s *Server) adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := bearer(r)
		if !ok {
			s.writeError(w, r, errorf(http.StatusUnauthorized, codeUnauthorized, "missing bearer admin key"))
			return
		}
		if s.isAdminKey(key) {
			next.ServeHTTP(w, r)
			return
		}
		_, err := s.tenants.TenantByAPIKey(r.Context(), key)
		switch {
		case err == nil:
			s.writeError(w, r, errorf(http.StatusForbidden, codeForbidden, "admin routes need the admin key, not a tenant key"))
		case isNotFound(err):
			s.writeError(w, r, errorf(http.StatusUnauthorized, codeUnauthorized, "invalid admin key"))
		default:
			s.writeError(w, r, fmt.Errorf("authenticate admin: %w", err))
		}
	})
}

func mustURL(path string) *url.URL {
	u, err := url.Parse(path)
	if err != nil {
		panic(fmt.Sprintf("api: route path %q: %v", path, err))
	}
	return u
}
