package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/console"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/metrics"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/cli"
	"github.com/commitlayer/commitlayer/service"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/worker"
	"github.com/commitlayer/commitlayer/workflows"
)

// Roles say what a process runs: the API; the product's worker (its
// workflows on its queue, production rules, a version of its deployment);
// the benchmark's runner (its admin routes, the sandbox command: demo and
// sandbox, or COMMITLAYER_BENCHMARKS=1) and workers (cli.Node: a product
// worker never sees their tasks).
type Roles struct {
	API, Worker, Benchmark, BenchmarkWorker bool
}

// Main is one CommitLayer process: it owns the one pgx pool and the one
// Temporal client, and runs the API and/or the worker. Open is Build, then
// Start; between the two a caller may register more on ProductWorker.
type Main struct {
	Config        Config
	Logger        *slog.Logger
	WorkerOptions worker.Options

	DB         *postgres.DB
	Temporal   client.Client
	Registry   *prometheus.Registry
	Verifier   *verify.Client
	Activities *activities.Activities
	Guard      *netguard.Guard    // connector and webhook addresses off internal networks
	Contracts  *service.Contracts // compiled contracts
	Actions    *service.Actions   // records actions, lists orphans: the API's and the harness's one path
	API        *api.Server
	Reconciler *service.Reconciler // starts pending verifications, delivers the notices of new facts

	stopReconciler func()
	Bench          *cli.Node // the sandbox benchmark's part; nil without a benchmark role

	roles         Roles
	ProductWorker sdkworker.Worker // the product's, on Config.TaskQueue; nil without the Worker role
	stop          []func()         // background loops, stopped by Close
	server        *http.Server
	listener      net.Listener
	metricsServer *http.Server
	errc          chan error
	closeOnce     sync.Once
}

// Open builds the process and starts it.
func (m *Main) Open(ctx context.Context, roles Roles) error {
	if err := m.Build(ctx, roles); err != nil {
		return err
	}
	return m.Start(ctx)
}

// Build connects to the database (migrating it) and Temporal and builds
// what the roles ask for, serving nothing yet. On error, Close releases
// what was opened.
func (m *Main) Build(ctx context.Context, roles Roles) error {
	m.Logger = cmp.Or(m.Logger, slog.Default())
	m.roles, m.errc = roles, make(chan error, 2)
	if err := m.openDB(ctx); err != nil {
		return err
	}
	if err := m.openTemporal(ctx); err != nil {
		return err
	}
	storeID, err := m.DB.Identity(ctx)
	if err != nil {
		return err
	}
	m.Verifier = &verify.Client{
		Temporal: m.Temporal, TaskQueue: m.Config.TaskQueue, PollInterval: m.Config.PollInterval,
		StoreID: storeID, Dormancy: m.Config.Dormancy,
	}
	m.Contracts = service.NewContracts(m.DB, 0)
	guard := m.Config.Guard
	guard.Timeout = connectorTimeout
	m.Guard = netguard.New(guard)
	// The process's one Activities: its worker's, and the first verdict
	// answered beside a start (activities.FirstVerdict) where it records
	// actions.
	m.Activities = &activities.Activities{
		Store:  m.DB,
		Logger: m.Logger,
		// Production pulls go through the address guard: no loopback,
		// private, link-local or metadata address, at dial time and on
		// every redirect, unless COMMITLAYER_ALLOW_PRIVATE_ADDRESSES=1.
		HTTPClient: m.Guard.Client(),
		DialFunc:   m.Guard.DialContext,
		Contracts:  m.Contracts,
		Secrets:    m.Config.Secrets,
	}
	m.Actions = service.NewActions(m.DB, m.Contracts, m.Verifier, nil, m.Logger)
	m.Actions.FirstVerdict = func(ctx context.Context, tenantID, actionID string) error {
		return activities.FirstVerdict(ctx, m.Activities, tenantID, actionID)
	}
	// What was accepted while Temporal was away, and the notices of new
	// facts, are finished by the reconciler: every API and worker process
	// runs one, woken by the notices' inserts.
	m.Reconciler = service.NewReconciler(m.Actions)
	opts := m.WorkerOptions
	opts.StickyCacheSize = cmp.Or(opts.StickyCacheSize, m.Config.StickyCacheSize)
	if roles.Benchmark || roles.BenchmarkWorker {
		bopts := opts
		bopts.Deployment = m.Config.benchmarkDeployment()
		m.Bench, err = cli.OpenNode(ctx, cli.Product{DB: m.DB, Temporal: m.Temporal, Verifier: m.Verifier, Actions: m.Actions,
			Contracts: m.Contracts, Secrets: m.Config.Secrets, Logger: m.Logger}, cli.NodeConfig{
			Runner: roles.Benchmark, Workers: roles.BenchmarkWorker, TaskQueue: m.Config.Sandbox.TaskQueue, Worker: bopts,
			Dir: m.Config.Sandbox.Dir, QueryConnectors: m.Config.Sandbox.QueryConnectors,
			TemporalUI: m.Config.TemporalUI, Namespace: m.Config.Temporal.Namespace,
		})
		if err != nil {
			return err
		}
	}
	mounts, docs := m.Bench.Mounts()
	m.API = api.New(api.Config{
		Store:          m.DB,
		Actions:        m.Bench.Actions(m.Actions),
		TemporalHealth: m.Verifier.CheckHealth,
		AdminKey:       m.Config.AdminKey,
		Logger:         m.Logger,
		Registry:       m.Registry,
		Contracts:      m.Contracts,
		Secrets:        m.Config.Secrets,
		Guard:          m.Guard,
		MaxFutureSkew:  m.Config.MaxFutureSkew,
		Metrics:        m.Config.metricsMode(),
		// The benchmark's admin routes, with the Benchmark role.
		Mounts:           mounts,
		OpenAPIFragments: docs,
	})
	if roles.Worker {
		opts.TaskQueue = cmp.Or(opts.TaskQueue, m.Config.TaskQueue)
		opts.Deployment = m.Config.productDeployment()
		m.ProductWorker = worker.New(m.Temporal, m.Activities, opts)
	}
	return nil
}

// Start starts what Build built: the reconciler, the workers (making
// their build current as the policy says), fact retention, the API and
// the metrics server.
func (m *Main) Start(ctx context.Context) error {
	m.stopReconciler = m.background(func(ctx context.Context) {
		m.Reconciler.Run(ctx, func(ctx context.Context, wake func()) {
			m.DB.Listen(ctx, wake, m.Logger.With("component", "reconciler"))
		})
	})
	if err := m.startWorkers(ctx); err != nil {
		return err
	}
	if m.Config.FactRetention > 0 && m.roles.Worker {
		m.background(func(ctx context.Context) {
			m.DB.RunFactRetention(ctx, m.Config.FactRetention, retentionInterval, m.Logger.With("component", "retention"))
		})
	}
	if m.roles.API {
		if err := m.startAPI(); err != nil {
			return err
		}
		// The via paths of model-driven runs record through this API.
		m.Bench.ServeAPI(m.URL(), m.DB)
	}
	if m.Config.MetricsAddr != "" && (m.roles.API || m.roles.Worker) {
		return m.startMetrics()
	}
	return nil
}

// background runs loop until Close, or until the function it returns is
// called.
func (m *Main) background(loop func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	stop = func() { cancel(); <-done }
	m.stop = append(m.stop, stop)
	return stop
}

func (m *Main) openDB(ctx context.Context) error {
	if err := postgres.CreateDatabaseIfMissing(ctx, m.Config.DatabaseURL); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	db, err := postgres.Open(ctx, m.Config.DatabaseURL)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	m.DB = db
	if err := db.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate database: %w", err)
	}
	return nil
}

func (m *Main) openTemporal(ctx context.Context) error {
	m.Registry = prometheus.NewRegistry()
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := m.Config.Temporal
	opts.Logger = sdklog.NewStructuredLogger(m.Logger.With("component", "temporal"))
	mh, err := metrics.NewHandler(m.Registry, metrics.Options{})
	if err != nil {
		return err
	}
	opts.MetricsHandler = mh
	dialCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := client.DialContext(dialCtx, opts)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", opts.HostPort, err)
	}
	m.Temporal = c
	return nil
}

// connectorTimeout bounds one request of a production connector pull.
const connectorTimeout = 30 * time.Second

func (m *Main) startWorkers(ctx context.Context) error {
	if !m.roles.Worker && !m.roles.BenchmarkWorker {
		return nil
	}
	var moreAttrs []temporal.SearchAttributeKey
	if m.roles.BenchmarkWorker {
		moreAttrs = bench.SearchAttributes
	}
	if err := worker.EnsureSearchAttributes(ctx, m.Temporal, m.Config.Temporal.Namespace, moreAttrs...); err != nil {
		return err
	}
	if m.ProductWorker != nil {
		if err := m.ProductWorker.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		m.Logger.Info("worker started", "task_queue", cmp.Or(m.WorkerOptions.TaskQueue, m.Config.TaskQueue),
			"deployment", m.Config.productDeployment().String(), "store", m.Verifier.StoreID,
			"temporal", m.Config.Temporal.HostPort, "namespace", m.Config.Temporal.Namespace)
	}
	if err := m.Bench.Start(m.Logger); err != nil {
		return err
	}
	// Routing: once this build's workers poll, make it current as the
	// policy says (dev, demo, sandbox and tests: always; a fleet's worker:
	// only when its deployment has no current version yet).
	var deps []worker.Deployment
	if m.roles.Worker {
		deps = append(deps, m.Config.productDeployment())
	}
	if m.roles.BenchmarkWorker {
		deps = append(deps, m.Config.benchmarkDeployment())
	}
	for _, d := range deps {
		changed, err := worker.MakeCurrent(ctx, m.Temporal, d, m.Config.MakeCurrent, "commitlayer "+m.Config.BuildID)
		if err != nil {
			return err
		}
		if changed {
			m.Logger.Info("worker deployment: this build is now current", "deployment", d.Name, "build_id", d.BuildID)
		}
	}
	return nil
}

// startAPI serves the API (and the console) on COMMITLAYER_ADDR.
func (m *Main) startAPI() error {
	handler, err := m.apiHandler()
	if err != nil {
		return err
	}
	m.server = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 120 * time.Second, IdleTimeout: 2 * time.Minute}
	m.listener, err = m.serve(m.server, m.Config.Addr, "api", "COMMITLAYER_ADDR")
	return err
}

// startMetrics serves /metrics alone on COMMITLAYER_METRICS_ADDR (an
// address a scraper reaches and tenants do not).
func (m *Main) startMetrics() error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	m.metricsServer = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	_, err := m.serve(m.metricsServer, m.Config.MetricsAddr, "metrics", "COMMITLAYER_METRICS_ADDR")
	return err
}

// serve listens on addr (name is its variable) and serves srv, what, in
// the background; a failure ends Wait.
func (m *Main) serve(srv *http.Server, addr, what, name string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, name, err)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.errc <- fmt.Errorf("%s server: %w", what, err)
		}
	}()
	m.Logger.Info(what+" listening", "addr", "http://"+ln.Addr().String())
	return ln, nil
}

// URL is the API's base URL once it listens.
func (m *Main) URL() string {
	if m.listener == nil {
		return ""
	}
	return "http://" + m.listener.Addr().String()
}

// Wait blocks until ctx ends or a server fails.
func (m *Main) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-m.errc:
		return err
	}
}

// Close stops the API (draining requests), the background loops, the
// workers, and the clients. Closing twice is a no-op.
func (m *Main) Close() error {
	m.closeOnce.Do(m.close)
	return nil
}

func (m *Main) close() {
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = m.server.Shutdown(ctx)
		cancel()
	}
	if m.metricsServer != nil {
		_ = m.metricsServer.Close()
	}
	for _, stop := range m.stop {
		stop()
	}
	m.Bench.Close()
	if m.ProductWorker != nil {
		m.ProductWorker.Stop()
	}
	if m.Temporal != nil {
		m.Temporal.Close()
	}
	if m.DB != nil {
		m.DB.Close()
	}
}

// apiHandler is what the API process serves: the API, with the console
// at /console/ reading through the same store, verifier and orphan lister.
func (m *Main) apiHandler() (http.Handler, error) {
	c, err := console.New(console.Config{
		Store:      m.DB,
		Verifier:   m.Actions,
		Orphans:    m.Actions,
		TemporalUI: m.Config.TemporalUI,
		Namespace:  m.Config.Temporal.Namespace,
		WorkflowID: workflows.VerifyWorkflowID,
		Logger:     m.Logger.With("component", "console"),
	})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", c.Handler())
	mux.Handle("/console", c.Handler())
	mux.Handle("/", m.API.Handler())
	// Behind the trusted proxies' headers (the client's address, https).
	return m.Config.TrustedProxies.Wrap(mux), nil
}
