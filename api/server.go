// Package api is CommitLayer's HTTP API (documented in openapi.json), with
// bearer-key auth, JSON errors ({"error":{"code","message"}}) and
// Prometheus metrics. Other parts of a process add admin routes through
// Config.Mounts; recording, verifying and orphans go through service.Actions.
package api

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/service"
)

// Body limits: MaxFactsBody for POST /v1/facts, MaxBody for every other.
const (
	MaxFactsBody = 8 << 20
	MaxBody      = 1 << 20
)

// DefaultMaxFutureSkew is how far after the server's clock a pushed fact
// may be dated when Config.MaxFutureSkew is 0: a source's clock may run
// ahead, a typo'd year may not.
const DefaultMaxFutureSkew = 24 * time.Hour

// Timeouts of calls the API makes on a request's behalf.
const (
	healthTimeout  = 2 * time.Second
	recheckTimeout = 60 * time.Second
)

// The store interfaces' errors wrap commitlayer.ErrNotFound, ErrConflict
// and ErrInvalid where the input is at fault.

// TenantStore serves tenants and authenticates their keys.
type TenantStore interface {
	CreateTenant(ctx context.Context, name string) (commitlayer.Tenant, string, error)
	ListTenants(ctx context.Context) ([]commitlayer.Tenant, error)
	TenantByAPIKey(ctx context.Context, key string) (commitlayer.Tenant, error)
}

// ContractStore serves contract versions.
type ContractStore interface {
	PutContract(ctx context.Context, tenantID, contractID string, source []byte) (commitlayer.ContractRecord, bool, error)
	GetContract(ctx context.Context, tenantID, contractID string, version int) (commitlayer.ContractRecord, error)
	ListContracts(ctx context.Context, tenantID string) ([]commitlayer.ContractRecord, error)
}

// FactStore takes pushed facts (and notices the verifications watching them).
type FactStore interface {
	InsertFacts(ctx context.Context, tenantID string, facts []commitlayer.Fact) (commitlayer.InsertResult, error)
}

// ActionStore serves recorded actions and their verdicts.
type ActionStore interface {
	GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error)
	LatestVerdict(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error)
	VerdictHistory(ctx context.Context, tenantID, actionID string) ([]commitlayer.Verdict, error)
}

// ConnectorStore serves connectors and the coverage of sources.
type ConnectorStore interface {
	CreateConnector(ctx context.Context, tenantID string, c commitlayer.Connector) (commitlayer.Connector, error)
	DeleteConnector(ctx context.Context, tenantID, id string) error
	ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error)
	Sources(ctx context.Context, tenantID string) ([]commitlayer.SourceCoverage, error)
	// Spans POST /v1/traces rejected, shown with the sources.
	RecordSpanRejections(ctx context.Context, tenantID string, rs []commitlayer.SpanRejection) error
	SpanRejections(ctx context.Context, tenantID string) ([]commitlayer.SpanRejection, error)
}

// Store is every resource's store together; *postgres.DB satisfies it
// (checked in the tests, so this package does not import the adapter).
type Store interface {
	TenantStore
	ContractStore
	FactStore
	ActionStore
	ConnectorStore
	service.ActionStore
}

// Pinger is optionally implemented by a Store; /healthz uses it when present.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config holds the API's dependencies.
type Config struct {
	Store Store
	// Actions records actions and runs their verifications; nil makes one
	// on Store that records only (starts are left pending).
	Actions *service.Actions
	// TemporalHealth, when set, says whether Temporal answers (/readyz).
	TemporalHealth func(ctx context.Context) error
	// AdminKey authorizes the admin routes; empty disables them (401).
	AdminKey string
	Logger   *slog.Logger
	// Registry receives the API's metrics and is served on /metrics; nil
	// makes a private one.
	Registry *prometheus.Registry
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Mounts are other parts' admin routes (see Mount); OpenAPIFragments
	// document them in /openapi.json. A collision makes New panic.
	Mounts           []Mount
	OpenAPIFragments [][]byte
	Metrics          MetricsMode
	// Contracts loads compiled contracts (shared with the activities); nil
	// makes one on Store.
	Contracts *service.Contracts
	// MaxFutureSkew bounds how far past the server's clock an occurred_at
	// may be; 0 or less means DefaultMaxFutureSkew.
	MaxFutureSkew time.Duration
	// Secrets seals connector credentials; nil refuses the kinds needing one.
	Secrets *secrets.Box
	// Guard checks connector URLs (internal addresses refused unless
	// allowed); nil checks only their form.
	Guard *netguard.Guard
	// KeyFailures is how many wrong bearer keys a client address may send
	// a minute (default DefaultKeyFailures), counted when Store is a KeyLimiter.
	KeyFailures int
}

// MetricsMode says how the API serves /metrics.
type MetricsMode int

const (
	MetricsOpen  MetricsMode = iota // served to anyone who reaches the API
	MetricsAdmin                    // served to the admin key (a bearer token)
	MetricsOff                      // left out: served on an address of its own
)

// Server is the HTTP API. Build it with New.
type Server struct {
	store         Store
	pinger        Pinger // nil when the store cannot be pinged
	actions       *service.Actions
	health        func(ctx context.Context) error
	secrets       *secrets.Box
	guard         *netguard.Guard
	webhooks      WebhookStore // nil when the Store has none
	adminKey      string
	keyLimiter    KeyLimiter // nil: unlimited
	keyFailures   int
	log           *slog.Logger
	registry      *prometheus.Registry
	now           func() time.Time
	metrics       *httpMetrics
	otlpSpans     *prometheus.CounterVec // traces.go
	maxFutureSkew time.Duration
	contracts     *service.Contracts
	openapi       []byte // the served document: OpenAPI with the mounts' fragments

	mux    *http.ServeMux
	paths  *http.ServeMux // path patterns only, to tell 405 from 404
	routes []Route
}

// Route is one registered route.
type Route struct {
	Method string // GET, POST
	Path   string // a ServeMux path pattern: /v1/actions/{id}
	auth   authLevel
}

// New builds the server.
func New(cfg Config) *Server {
	s := &Server{
		store:         cfg.Store,
		contracts:     cfg.Contracts,
		actions:       cfg.Actions,
		health:        cfg.TemporalHealth,
		secrets:       cfg.Secrets,
		guard:         cfg.Guard,
		adminKey:      cfg.AdminKey,
		log:           cmp.Or(cfg.Logger, slog.Default()),
		registry:      cmp.Or(cfg.Registry, prometheus.NewRegistry()),
		now:           cfg.Now,
		maxFutureSkew: cmp.Or(max(cfg.MaxFutureSkew, 0), DefaultMaxFutureSkew),
		keyFailures:   cmp.Or(max(cfg.KeyFailures, 0), DefaultKeyFailures),
		mux:           http.NewServeMux(),
		paths:         http.NewServeMux(),
	}
	s.webhooks, _ = cfg.Store.(WebhookStore)
	s.pinger, _ = cfg.Store.(Pinger)
	s.keyLimiter, _ = cfg.Store.(KeyLimiter)
	if s.now == nil {
		s.now = time.Now
	}
	s.metrics = newHTTPMetrics(s.registry)
	if s.contracts == nil {
		s.contracts = service.NewContracts(cfg.Store, 0)
	}
	if s.actions == nil {
		s.actions = service.NewActions(cfg.Store, s.contracts, nil, s.now, s.log)
	}

	s.handle("GET /healthz", authNone, s.healthz)
	s.handle("GET /readyz", authNone, s.readyz)
	prom := promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
	metrics := func(w http.ResponseWriter, r *http.Request) error {
		prom.ServeHTTP(w, r)
		return nil
	}
	switch cfg.Metrics {
	case MetricsOpen:
		s.handle("GET /metrics", authNone, metrics)
	case MetricsAdmin:
		s.handle("GET /metrics", authAdmin, metrics)
	}
	doc, err := mergeOpenAPI(OpenAPI, cfg.OpenAPIFragments...)
	if err != nil {
		panic(fmt.Sprintf("api: %v", err))
	}
	s.openapi = doc
	s.handle("GET /openapi.json", authNone, s.serveOpenAPI)

	s.handle("POST /v1/contracts", authTenant, s.postContract)
	s.handle("GET /v1/contracts", authTenant, s.listContracts)
	s.handle("GET /v1/contracts/{id}", authTenant, s.getContract)
	s.handle("POST /v1/facts", authTenant, jsonOnly(s.postFacts))
	s.handle("POST /v1/connectors", authTenant, jsonOnly(s.postConnector))
	s.handle("GET /v1/connectors", authTenant, s.listConnectors)
	s.handle("DELETE /v1/connectors/{id}", authTenant, s.deleteConnector)
	s.handle("GET /v1/sources", authTenant, s.listSources)
	s.handle("POST /v1/actions", authTenant, jsonOnly(s.postAction))
	s.handle("GET /v1/actions", authTenant, s.listActions)
	s.handle("GET /v1/actions/stats", authTenant, s.actionStats)
	s.handle("GET /v1/actions/orphans", authTenant, s.orphans)
	s.handle("GET /v1/actions/{id}", authTenant, s.getAction)
	s.handle("POST /v1/actions/{id}/recheck", authTenant, s.recheck)
	s.handle("POST /v1/actions/{id}/attempts", authTenant, jsonOnly(s.postAttempt))
	s.handle("POST /v1/webhooks", authTenant, jsonOnly(s.postWebhook))
	s.handle("GET /v1/webhooks", authTenant, s.listWebhooks)
	s.handle("DELETE /v1/webhooks/{id}", authTenant, s.deleteWebhook)
	s.handle("GET /v1/webhooks/{id}/deliveries", authTenant, s.webhookDeliveries)
	s.traceRoutes()
	s.handle("POST /v1/webhooks/{id}/rotate", authTenant, jsonOnly(s.rotateWebhook))
	s.handle("POST /v1/webhooks/{id}/enable", authTenant, s.enableWebhook)

	s.handle("POST /v1/admin/tenants", authAdmin, jsonOnly(s.postTenant))
	s.handle("GET /v1/admin/tenants", authAdmin, s.listTenants)
	for _, m := range cfg.Mounts {
		s.mount(m)
	}

	s.mux.Handle("/", s.instrument("unmatched", http.HandlerFunc(s.unmatched)))
	return s
}

// Handler returns the API's handler: request ids, then per route panic
// recovery, metrics, auth and the handler.
func (s *Server) Handler() http.Handler {
	return s.requestID(s.mux)
}

func (s *Server) handle(pattern string, auth authLevel, h handler) {
	s.handleWith(pattern, auth, h, s.writeError)
}

// handler answers a request; an error it returns (having written nothing)
// is answered by the route's fail.
type handler = func(w http.ResponseWriter, r *http.Request) error

// handleWith is handle with errors (refusals of auth included) answered by fail.
func (s *Server) handleWith(pattern string, auth authLevel, h handler, fail func(http.ResponseWriter, *http.Request, error)) {
	method, path, _ := strings.Cut(pattern, " ")
	if !slices.ContainsFunc(s.routes, func(rt Route) bool { return rt.Path == path }) {
		s.paths.Handle(path, http.NotFoundHandler())
	}
	s.routes = append(s.routes, Route{Method: method, Path: path, auth: auth})
	s.mux.Handle(pattern, s.instrument(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ar, err := s.authorize(w, r, auth)
		if err == nil {
			err = h(w, ar)
		}
		if err != nil {
			fail(w, r, err)
		}
	})))
}

// unmatched answers requests no route took: 405 with Allow when the path
// exists under other methods, else 404, both in the error shape.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) {
	if _, p := s.paths.Handler(r); p != "" {
		var allow []string
		for _, rt := range s.routes {
			if rt.Path == p {
				allow = append(allow, rt.Method)
				if rt.Method == http.MethodGet {
					allow = append(allow, http.MethodHead)
				}
			}
		}
		slices.Sort(allow)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		s.writeError(w, r, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	s.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no route %s %s", r.Method, r.URL.Path))
}

// healthz is liveness; dependencies are /readyz's.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, client.Health{Status: "ok"})
}

// readyz answers 200 when the database and Temporal both answer within a
// short timeout, else 503 naming which did not (the detail is logged).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	var dbErr error
	if s.pinger != nil {
		dbErr = s.pinger.Ping(ctx)
	} else {
		// A key that cannot exist: "not found" means the database answered.
		_, dbErr = s.store.TenantByAPIKey(ctx, "cl_healthz_probe")
		if isNotFound(dbErr) {
			dbErr = nil
		}
	}
	body := client.Ready{Status: "ok", Database: "ok", Temporal: "ok"}
	if dbErr != nil {
		s.logError(r, "readiness: database", dbErr)
		body.Database, body.Status = "unavailable", "unavailable"
	}
	if s.health == nil {
		body.Temporal, body.Status = "not configured", "unavailable"
	} else if err := s.health(ctx); err != nil {
		s.logError(r, "readiness: temporal", err)
		body.Temporal, body.Status = "unavailable", "unavailable"
	}
	status := http.StatusOK
	if body.Status != "ok" {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	return writeJSON(w, status, body)
}
