package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
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
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/metrics"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/benchapi"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	sbcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/service"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/worker"
)

// Roles say what a process runs.
type Roles struct {
	API bool
	// Worker runs the product's worker: VerifyAction and PollConnectors on
	// the product's task queue, with production rules (the address guard),
	// as a version of the product's Worker Deployment.
	Worker bool
	// Benchmark puts the sandbox benchmark's runner in the process: the
	// API's admin benchmark routes and the sandbox command start runs with
	// it. `demo` and `sandbox` set it; `api`, `worker` and `dev` do when
	// COMMITLAYER_BENCHMARKS=1.
	Benchmark bool
	// BenchmarkWorker runs the benchmark's own workers: its workflows and
	// the harness's activities on the benchmark task queue, and the
	// scenarios' verifications (the product's VerifyAction with the
	// sandbox's wiring) on this process's own queue, as a version of the
	// benchmark's deployment. A product worker never sees these tasks.
	BenchmarkWorker bool
}

// Main is one CommitLayer process: it owns the one pgx pool and the one
// Temporal client, and runs the API and/or the worker.
type Main struct {
	Config Config
	Logger *slog.Logger

	DB         *postgres.DB
	Temporal   client.Client
	Registry   *prometheus.Registry
	Verifier   *verify.Client
	Activities *activities.Activities
	// WorkerOptions tune the worker.
	WorkerOptions worker.Options
	// RegisterMore, when set, registers more workflows on the worker before
	// it starts (the bench command's baselines).
	RegisterMore func(sdkworker.Registry)
	// Guard keeps connector and webhook addresses off internal networks.
	Guard *netguard.Guard
	// Secrets seals and opens connector credentials; nil without
	// COMMITLAYER_SECRETS_KEY.
	Secrets *secrets.Box
	// Contracts loads compiled contracts for the API and the worker.
	Contracts *service.Contracts
	// Actions records actions and lists orphans (the API's and the
	// harness's one path).
	Actions *service.Actions
	// Runner starts benchmark runs (the admin routes and the sandbox
	// command); Harness runs their scenarios in a worker process. Both are
	// nil unless the process has the Benchmark role.
	Runner  *bench.Runner
	Harness *harness.Activities
	// Bench is the benchmark's store (its runs, run tenants and agent
	// steps, in the database's benchmark schema) on DB's pool; nil unless
	// the process has the Benchmark role.
	Bench *benchstore.Store
	// API is the HTTP API's server.
	API *api.Server
	// Reconciler starts pending verifications and delivers pending notices
	// of facts, in the background while the process runs.
	Reconciler *service.Reconciler

	stopReconciler func()
	reconcilerDone chan struct{}
	stopRetention  func()

	worker sdkworker.Worker // the product's, on Config.TaskQueue
	bench  sdkworker.Worker // the benchmark's, on Config.BenchmarkTaskQueue
	local  sdkworker.Worker // this process's own queue: steps bound to its enterprises
	// BenchActivities are the product's activities with the sandbox's
	// wiring, run by the scenarios' verifications on the local queue.
	BenchActivities *activities.Activities
	server          *http.Server
	listener        net.Listener

	metricsServer   *http.Server
	metricsListener net.Listener
	errc            chan error
	closeOnce       sync.Once
}

// Open connects to the database (migrating it) and Temporal, then starts
// what the roles ask for. On error, Close releases what was opened.
func (m *Main) Open(ctx context.Context, roles Roles) error {
	if m.Logger == nil {
		m.Logger = slog.Default()
	}
	m.errc = make(chan error, 2)
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
	m.Actions = service.NewActions(m.DB, m.Contracts, m.Verifier, nil, m.Logger)
	// What was accepted while Temporal was away, and the notices of new
	// facts, are finished by the reconciler: every API and worker process
	// runs one, woken by the notices' inserts.
	m.Reconciler = service.NewReconciler(m.Actions)
	rctx, stopReconciler := context.WithCancel(context.WithoutCancel(ctx))
	m.stopReconciler = stopReconciler
	m.reconcilerDone = make(chan struct{})
	go func() {
		defer close(m.reconcilerDone)
		m.Reconciler.Run(rctx, func(ctx context.Context, wake func()) {
			m.DB.Listen(ctx, wake, m.Logger.With("component", "reconciler"))
		})
	}()
	box, err := secrets.FromEnv(os.Getenv)
	switch {
	case errors.Is(err, secrets.ErrNoKey):
		box = nil // connector kinds that keep a credential are refused
	case err != nil:
		return fmt.Errorf("%s: %w", secrets.EnvKey, err)
	}
	m.Secrets = box
	gopts, err := netguard.FromEnv()
	if err != nil {
		return err
	}
	gopts.Timeout = connectorTimeout
	m.Guard = netguard.New(gopts)
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
		Secrets:    m.Secrets,
	}
	m.Actions.FirstVerdict = func(ctx context.Context, tenantID, actionID string) error {
		return activities.FirstVerdict(ctx, m.Activities, tenantID, actionID)
	}
	var mounts []api.Mount
	var docs [][]byte
	if roles.Benchmark || roles.BenchmarkWorker {
		if err := m.openBench(ctx); err != nil {
			return err
		}
	}
	if roles.Benchmark {
		m.Runner = &bench.Runner{Temporal: m.Temporal, Store: m.Bench, TaskQueue: m.Config.BenchmarkTaskQueue}
		routes := &benchapi.API{Runs: m.Bench, Runner: m.Runner,
			Reports: bench.Reports{TemporalUI: temporalUIBase(m.Config), Namespace: m.Config.Temporal.Namespace}}
		mounts, docs = routes.Mounts(), [][]byte{benchapi.OpenAPI}
	}
	m.API = api.New(api.Config{
		Store:          m.DB,
		Actions:        m.apiActions(roles),
		TemporalHealth: m.Verifier.CheckHealth,
		AdminKey:       m.Config.AdminKey,
		Logger:         m.Logger,
		Registry:       m.Registry,
		Contracts:      m.Contracts,
		Secrets:        m.Secrets,
		Guard:          m.Guard,
		MaxFutureSkew:  m.Config.MaxFutureSkew,
		Metrics:        m.Config.metricsMode(),
		// The benchmark's admin routes, with the Benchmark role.
		Mounts:           mounts,
		OpenAPIFragments: docs,
	})
	if roles.Worker || roles.BenchmarkWorker {
		if err := m.startWorkers(ctx, roles); err != nil {
			return err
		}
	}
	m.startRetention(roles)
	if roles.API {
		if err := m.startAPI(); err != nil {
			return err
		}
		if m.Harness != nil {
			// The via paths of model-driven runs record through this API.
			m.Harness.API, m.Harness.Actions = m.URL(), m.DB
		}
	}
	if m.Config.MetricsAddr != "" && (roles.API || roles.Worker) {
		if err := m.startMetrics(); err != nil {
			return err
		}
	}
	return nil
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

// openBench migrates the benchmark's own schema, after the product's.
func (m *Main) openBench(ctx context.Context) error {
	m.Bench = benchstore.New(m.DB)
	if err := m.Bench.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate benchmark schema: %w", err)
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

func (m *Main) startWorkers(ctx context.Context, roles Roles) error {
	var moreAttrs []temporal.SearchAttributeKey
	if roles.BenchmarkWorker {
		moreAttrs = bench.SearchAttributes
	}
	if err := worker.EnsureSearchAttributes(ctx, m.Temporal, m.Config.Temporal.Namespace, moreAttrs...); err != nil {
		return err
	}
	if roles.Worker {
		if err := m.startProductWorker(); err != nil {
			return err
		}
	}
	if roles.BenchmarkWorker {
		if err := m.startBenchmarkWorkers(); err != nil {
			return err
		}
	}
	// Routing: once this build's workers poll, make it current as the
	// policy says (dev, demo, sandbox and tests: always; a fleet's worker:
	// only when its deployment has no current version yet).
	identity := "commitlayer " + m.Config.BuildID
	if roles.Worker {
		if err := m.makeCurrent(ctx, m.Config.productDeployment(), identity); err != nil {
			return err
		}
	}
	if roles.BenchmarkWorker {
		if err := m.makeCurrent(ctx, m.Config.benchmarkDeployment(), identity); err != nil {
			return err
		}
	}
	return nil
}

func (m *Main) makeCurrent(ctx context.Context, d worker.Deployment, identity string) error {
	changed, err := worker.MakeCurrent(ctx, m.Temporal, d, m.Config.MakeCurrent, identity)
	if err != nil {
		return err
	}
	if changed {
		m.Logger.Info("worker deployment: this build is now current", "deployment", d.Name, "build_id", d.BuildID)
	}
	return nil
}

// startProductWorker starts the product's worker: production rules, the
// product's queue and deployment, nothing of the benchmark.
func (m *Main) startProductWorker() error {
	opts := m.WorkerOptions
	opts.StickyCacheSize = cmp.Or(opts.StickyCacheSize, m.Config.StickyCacheSize)
	if opts.TaskQueue == "" {
		opts.TaskQueue = m.Config.TaskQueue
	}
	opts.Deployment = m.Config.productDeployment()
	m.worker = worker.New(m.Temporal, m.Activities, opts)
	if m.RegisterMore != nil {
		m.RegisterMore(m.worker)
	}
	if err := m.worker.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	m.Logger.Info("worker started", "task_queue", opts.TaskQueue,
		"deployment", opts.Deployment.String(), "store", m.Verifier.StoreID,
		"temporal", m.Config.Temporal.HostPort, "namespace", m.Config.Temporal.Namespace)
	return nil
}

// startBenchmarkWorkers starts the benchmark's workers: its workflows and
// the harness's activities on the benchmark queue; on this process's own
// queue, the steps bound to its enterprises and the scenarios'
// verifications — the product's VerifyAction with the sandbox's wiring
// (connector pulls through each scenario's chaos transport, verdicts
// reported to the scenario).
func (m *Main) startBenchmarkWorkers() error {
	localQueue := localTaskQueue(m.Config.BenchmarkTaskQueue)
	host := &harness.Host{}
	m.Harness = &harness.Activities{
		Store:     m.Bench,
		Recorder:  m.Actions,
		Rechecker: m.Verifier,
		Contracts: sbcontracts.FS,
		Dir:       m.Config.SandboxDir,
		TaskQueue: localQueue,
		Logger:    m.Logger,
		Host:      host,
		// Model-driven agents: providers built in this process (keys
		// from its environment), turns and tool calls written ahead.
		Models:     &harness.Models{},
		AgentSteps: m.Bench,
	}
	// The sandbox's systems listen on the loopback: its own wiring pulls
	// them without the production guard, each tenant through its
	// scenario's extractor chaos.
	m.BenchActivities = &activities.Activities{
		Store:      m.DB,
		Logger:     m.Logger,
		HTTPClient: host.ExtractClient(),
		Contracts:  m.Contracts,
		Secrets:    m.Secrets,
	}
	opts := m.WorkerOptions
	opts.StickyCacheSize = cmp.Or(opts.StickyCacheSize, m.Config.StickyCacheSize)
	opts.Deployment = m.Config.benchmarkDeployment()
	m.bench = worker.NewBare(m.Temporal, m.Config.BenchmarkTaskQueue, opts)
	bench.Register(m.bench)
	harness.Register(m.bench, m.Harness)
	m.local = worker.NewBare(m.Temporal, localQueue, opts)
	bench.RegisterVerifications(m.local, m.BenchActivities, &bench.Reporter{
		Activities: m.BenchActivities, Temporal: m.Temporal, Scenarios: host, Logger: m.Logger,
	})
	harness.Register(m.local, m.Harness)
	if err := m.bench.Start(); err != nil {
		return fmt.Errorf("start benchmark worker: %w", err)
	}
	if err := m.local.Start(); err != nil {
		return fmt.Errorf("start local worker: %w", err)
	}
	m.Logger.Info("benchmark workers started", "task_queue", m.Config.BenchmarkTaskQueue, "local_queue", localQueue,
		"deployment", opts.Deployment.String())
	return nil
}

// localTaskQueue names this process's own task queue.
func localTaskQueue(shared string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-local-%s-%d-%s", shared, host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (m *Main) startAPI() error {
	ln, err := net.Listen("tcp", m.Config.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", m.Config.Addr, err)
	}
	m.listener = ln
	handler, err := m.apiHandler()
	if err != nil {
		_ = ln.Close()
		return err
	}
	m.server = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() {
		if err := m.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	m.Logger.Info("api listening", "addr", "http://"+ln.Addr().String())
	return nil
}

// startMetrics serves /metrics alone on COMMITLAYER_METRICS_ADDR (an
// address a scraper reaches and tenants do not).
func (m *Main) startMetrics() error {
	ln, err := net.Listen("tcp", m.Config.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (COMMITLAYER_METRICS_ADDR): %w", m.Config.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	m.metricsServer = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.metricsListener = ln
	go func() {
		if err := m.metricsServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.errc <- fmt.Errorf("metrics server: %w", err)
		}
	}()
	m.Logger.Info("metrics listening", "addr", "http://"+ln.Addr().String()+"/metrics")
	return nil
}

// MetricsURL is the metrics server's /metrics URL, when it runs.
func (m *Main) MetricsURL() string {
	if m.metricsListener == nil {
		return ""
	}
	return "http://" + m.metricsListener.Addr().String() + "/metrics"
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

// Close stops the API (draining requests), the worker, and the clients.
// Closing twice is a no-op.
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
	if m.stopReconciler != nil {
		m.stopReconciler()
		<-m.reconcilerDone
	}
	if m.stopRetention != nil {
		m.stopRetention()
	}
	if m.local != nil {
		m.local.Stop()
	}
	if m.bench != nil {
		m.bench.Stop()
	}
	if m.worker != nil {
		m.worker.Stop()
	}
	if m.Harness != nil {
		m.Harness.Host.CloseAll()
		if m.Harness.Models != nil {
			m.Harness.Models.Close()
		}
	}
	if m.Temporal != nil {
		m.Temporal.Close()
	}
	if m.DB != nil {
		m.DB.Close()
	}
}
