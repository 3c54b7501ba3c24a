package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/worker"
	"github.com/commitlayer/commitlayer/workflows"
)

// Config is the process configuration, read from the environment.
type Config struct {
	Addr        string // COMMITLAYER_ADDR
	DatabaseURL string // DATABASE_URL
	AdminKey    string // COMMITLAYER_ADMIN_KEY
	TaskQueue   string // COMMITLAYER_TASK_QUEUE (default "commitlayer")
	// BenchmarkTaskQueue is the benchmark's task queue
	// (COMMITLAYER_BENCHMARK_TASK_QUEUE, default TaskQueue + "-benchmark").
	BenchmarkTaskQueue string
	// Deployment is the product's Worker Deployment name
	// (COMMITLAYER_DEPLOYMENT, default "commitlayer"); the benchmark's
	// workers are versions of BenchmarkDeployment
	// (COMMITLAYER_BENCHMARK_DEPLOYMENT, default Deployment + "-benchmark").
	Deployment          string
	BenchmarkDeployment string
	// BuildID is this build (COMMITLAYER_BUILD_ID, default the binary's
	// VCS revision, see worker.CurrentBuild).
	BuildID string
	// Versioning runs the workers as Worker Deployment versions
	// (COMMITLAYER_WORKER_VERSIONING, default 1; 0 for a Temporal server
	// without Worker Versioning).
	Versioning bool
	// MakeCurrent says whether a worker makes its build its deployment's
	// current version at start (COMMITLAYER_MAKE_CURRENT: auto, the
	// default, when the deployment has none; always; never). dev, demo and
	// sandbox default to always.
	MakeCurrent worker.CurrentPolicy
	// IgnoreMissingQueues lets this process make its build current although
	// the current build polls task queues it does not
	// (COMMITLAYER_IGNORE_MISSING_TASK_QUEUES=1): a fleet that moved to
	// another COMMITLAYER_TASK_QUEUE, or tests whose stacks each have a
	// queue of their own. Otherwise Temporal refuses such a change, since
	// those queues' workflows would be left unversioned.
	IgnoreMissingQueues bool
	// PollInterval is how often connectors are pulled during a watch
	// (COMMITLAYER_POLL_INTERVAL, a Go duration).
	PollInterval time.Duration
	// MaxFutureSkew bounds how far after the API's clock a pushed fact may
	// be dated (COMMITLAYER_MAX_FUTURE_SKEW, a Go duration, default 24h).
	MaxFutureSkew time.Duration
	Temporal      client.Options // TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*
	// MetricsAddr, when set, serves /metrics on an address of its own
	// (COMMITLAYER_METRICS_ADDR) and not on the API's; MetricsAdmin puts the
	// API's /metrics behind the admin key (COMMITLAYER_METRICS_ADMIN=1).
	MetricsAddr  string
	MetricsAdmin bool
	// SandboxDir holds the sandbox enterprises' files while a benchmark
	// runs (COMMITLAYER_SANDBOX_DIR, default .data/sandbox).
	SandboxDir string
	// FactRetention, when set, purges facts past it that no open
	// verification reads (COMMITLAYER_FACT_RETENTION; see retention.go).
	FactRetention time.Duration
	// StickyCacheSize bounds the workflows a worker keeps in memory
	// (COMMITLAYER_STICKY_CACHE_SIZE, default worker.StickyCacheSizeFor the
	// process's memory limit).
	StickyCacheSize int
	// Dormancy is what the verifications this process starts may sleep
	// through outside the worker (COMMITLAYER_DORMANT_AFTER,
	// COMMITLAYER_DORMANT_MIN_AGE; default workflows.DefaultDormancy).
	Dormancy workflows.Dormancy
	// TrustedProxies are the peers whose X-Forwarded-For and
	// X-Forwarded-Proto the API believes (COMMITLAYER_TRUSTED_PROXIES:
	// addresses and CIDR ranges; default none).
	TrustedProxies *api.Proxies
}

func (c Config) metricsMode() api.MetricsMode {
	switch {
	case c.MetricsAddr != "":
		return api.MetricsOff
	case c.MetricsAdmin:
		return api.MetricsAdmin
	}
	return api.MetricsOpen
}

// DefaultDatabaseURL is the local development database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/commitlayer?sslmode=disable"

// ConfigFromEnv reads the configuration. An admin key is required when the
// API runs.
func ConfigFromEnv(roles Roles) (Config, error) {
	cfg := Config{
		Addr:        envOr("COMMITLAYER_ADDR", "127.0.0.1:8080"),
		DatabaseURL: envOr("DATABASE_URL", DefaultDatabaseURL),
		AdminKey:    os.Getenv("COMMITLAYER_ADMIN_KEY"),
		TaskQueue:   envOr("COMMITLAYER_TASK_QUEUE", workflows.TaskQueue),
		SandboxDir:  envOr("COMMITLAYER_SANDBOX_DIR", filepath.Join(".data", "sandbox")),
		MetricsAddr: strings.TrimSpace(os.Getenv("COMMITLAYER_METRICS_ADDR")),
	}
	cfg.BenchmarkTaskQueue = envOr("COMMITLAYER_BENCHMARK_TASK_QUEUE", cfg.TaskQueue+"-benchmark")
	if cfg.BenchmarkTaskQueue == cfg.TaskQueue {
		return Config{}, fmt.Errorf("COMMITLAYER_BENCHMARK_TASK_QUEUE must differ from COMMITLAYER_TASK_QUEUE (%q): a product worker must never be handed a benchmark task", cfg.TaskQueue)
	}
	cfg.Deployment = envOr("COMMITLAYER_DEPLOYMENT", worker.DefaultDeployment)
	cfg.BenchmarkDeployment = envOr("COMMITLAYER_BENCHMARK_DEPLOYMENT", cfg.Deployment+"-benchmark")
	if cfg.BenchmarkDeployment == cfg.Deployment {
		return Config{}, fmt.Errorf("COMMITLAYER_BENCHMARK_DEPLOYMENT must differ from COMMITLAYER_DEPLOYMENT (%q)", cfg.Deployment)
	}
	cfg.BuildID = envOr("COMMITLAYER_BUILD_ID", worker.CurrentBuild().ID)
	switch v := strings.TrimSpace(os.Getenv("COMMITLAYER_WORKER_VERSIONING")); v {
	case "", "1":
		cfg.Versioning = true
	case "0":
	default:
		return Config{}, fmt.Errorf("COMMITLAYER_WORKER_VERSIONING is 0 or 1, got %q", v)
	}
	switch v := strings.TrimSpace(os.Getenv("COMMITLAYER_IGNORE_MISSING_TASK_QUEUES")); v {
	case "", "0":
	case "1":
		cfg.IgnoreMissingQueues = true
	default:
		return Config{}, fmt.Errorf("COMMITLAYER_IGNORE_MISSING_TASK_QUEUES is 0 or 1, got %q", v)
	}
	policy, err := worker.ParseCurrentPolicy(os.Getenv("COMMITLAYER_MAKE_CURRENT"))
	if err != nil {
		return Config{}, err
	}
	cfg.MakeCurrent = policy
	for _, d := range []worker.Deployment{cfg.productDeployment(), cfg.benchmarkDeployment()} {
		if err := d.Validate(); err != nil {
			return Config{}, err
		}
	}
	switch v := os.Getenv("COMMITLAYER_METRICS_ADMIN"); v {
	case "", "0":
	case "1":
		cfg.MetricsAdmin = true
	default:
		return Config{}, fmt.Errorf("COMMITLAYER_METRICS_ADMIN is 0 or 1, got %q", v)
	}
	if s := os.Getenv("COMMITLAYER_POLL_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("COMMITLAYER_POLL_INTERVAL %q is not a positive duration", s)
		}
		cfg.PollInterval = d
	}
	cfg.MaxFutureSkew = api.DefaultMaxFutureSkew
	if s := os.Getenv("COMMITLAYER_MAX_FUTURE_SKEW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("COMMITLAYER_MAX_FUTURE_SKEW %q is not a positive duration (e.g. 24h)", s)
		}
		cfg.MaxFutureSkew = d
	}
	if cfg.StickyCacheSize, err = worker.StickyCacheSizeFromEnv(); err != nil {
		return Config{}, err
	}
	if cfg.FactRetention, err = factRetentionFromEnv(); err != nil {
		return Config{}, err
	}
	if cfg.Dormancy, err = dormancyFromEnv(); err != nil {
		return Config{}, err
	}
	if cfg.TrustedProxies, err = api.ParseProxies(os.Getenv("COMMITLAYER_TRUSTED_PROXIES")); err != nil {
		return Config{}, fmt.Errorf("COMMITLAYER_TRUSTED_PROXIES: %w", err)
	}
	if roles.API && len(cfg.AdminKey) < 16 {
		return Config{}, errors.New("COMMITLAYER_ADMIN_KEY must be set to a secret of at least 16 characters")
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return Config{}, fmt.Errorf("temporal configuration: %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = client.DefaultHostPort
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	cfg.Temporal = opts
	return cfg, nil
}

// productDeployment is the product workers' deployment version.
func (c Config) productDeployment() worker.Deployment {
	if !c.Versioning {
		return worker.Deployment{}
	}
	return worker.Deployment{Name: c.Deployment, BuildID: c.BuildID, IgnoreMissingQueues: c.IgnoreMissingQueues}
}

// benchmarkDeployment is the benchmark workers' deployment version.
func (c Config) benchmarkDeployment() worker.Deployment {
	if !c.Versioning {
		return worker.Deployment{}
	}
	return worker.Deployment{Name: c.BenchmarkDeployment, BuildID: c.BuildID, IgnoreMissingQueues: true}
}

// defaultMakeCurrent makes `always` the policy of a one-machine command
// (dev, demo, sandbox) unless COMMITLAYER_MAKE_CURRENT says otherwise.
func (c *Config) defaultMakeCurrent() {
	if strings.TrimSpace(os.Getenv("COMMITLAYER_MAKE_CURRENT")) == "" {
		c.MakeCurrent = worker.CurrentAlways
	}
}

// minDormantAge is the least COMMITLAYER_DORMANT_MIN_AGE: a notice decided
// before half of it must still find the verification awake
// (workflows.Dormancy.WakeByStart), a second at least.
const minDormantAge = 2 * time.Second

// dormancyFromEnv reads COMMITLAYER_DORMANT_AFTER (the least wait a
// verification sleeps through outside the worker; 0 or off: never) and
// COMMITLAYER_DORMANT_MIN_AGE (how old it must be first).
func dormancyFromEnv() (workflows.Dormancy, error) {
	d := workflows.DefaultDormancy
	switch s := strings.ToLower(strings.TrimSpace(os.Getenv("COMMITLAYER_DORMANT_AFTER"))); s {
	case "":
	case "off", "0":
		return workflows.Dormancy{}, nil
	default:
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return workflows.Dormancy{}, fmt.Errorf("COMMITLAYER_DORMANT_AFTER %q is not a duration of 0 or more (e.g. 10m), or off", s)
		}
		if v == 0 {
			return workflows.Dormancy{}, nil
		}
		d.MinWait = v
	}
	if s := strings.TrimSpace(os.Getenv("COMMITLAYER_DORMANT_MIN_AGE")); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v < minDormantAge {
			return workflows.Dormancy{}, fmt.Errorf("COMMITLAYER_DORMANT_MIN_AGE %q is not a duration of at least %s (e.g. 2m)", s, minDormantAge)
		}
		d.MinAge = v
	}
	return d, nil
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}
