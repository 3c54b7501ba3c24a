package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/worker"
	"github.com/commitlayer/commitlayer/workflows"
)

// Config is the process's configuration: one value, built once from the
// environment (LoadConfig), then the command's flags. docs/configuration.md
// lists the product's variables and sandbox/README.md the benchmark's; a
// test checks both tables against the code.
type Config struct {
	Addr, DatabaseURL, AdminKey string // COMMITLAYER_ADDR, DATABASE_URL, COMMITLAYER_ADMIN_KEY
	TaskQueue                   string // COMMITLAYER_TASK_QUEUE
	// The Worker Deployment: COMMITLAYER_DEPLOYMENT, COMMITLAYER_BUILD_ID,
	// COMMITLAYER_WORKER_VERSIONING, COMMITLAYER_MAKE_CURRENT (makeCurrentSet:
	// it was set, so dev, demo and sandbox keep it), and
	// COMMITLAYER_IGNORE_MISSING_TASK_QUEUES.
	Deployment, BuildID string
	Versioning          bool
	MakeCurrent         worker.CurrentPolicy
	makeCurrentSet      bool
	IgnoreMissingQueues bool
	PollInterval        time.Duration      // COMMITLAYER_POLL_INTERVAL
	MaxFutureSkew       time.Duration      // COMMITLAYER_MAX_FUTURE_SKEW
	Temporal            client.Options     // TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*
	MetricsAddr         string             // COMMITLAYER_METRICS_ADDR
	MetricsAdmin        bool               // COMMITLAYER_METRICS_ADMIN
	FactRetention       time.Duration      // COMMITLAYER_FACT_RETENTION
	StickyCacheSize     int                // COMMITLAYER_STICKY_CACHE_SIZE
	TrustedProxies      *api.Proxies       // COMMITLAYER_TRUSTED_PROXIES
	Dormancy            workflows.Dormancy // COMMITLAYER_DORMANT_AFTER, COMMITLAYER_DORMANT_MIN_AGE
	Secrets             *secrets.Box       // COMMITLAYER_SECRETS_KEY (nil without)
	Guard               netguard.Options   // COMMITLAYER_ALLOW_PRIVATE_ADDRESSES
	TemporalUI          string             // COMMITLAYER_TEMPORAL_UI
	LogLevel            slog.Level         // COMMITLAYER_LOG_LEVEL (logLevelSet: it was set)
	logLevelSet         bool
	CPUProfile          string // COMMITLAYER_CPUPROFILE
	// Where `commitlayer mcp` records actions: COMMITLAYER_URL, COMMITLAYER_API_KEY.
	APIURL, APIKey string
	Sandbox        SandboxConfig
}

// SandboxConfig is the benchmark's part of the configuration.
type SandboxConfig struct {
	Enabled               bool     // COMMITLAYER_BENCHMARKS: api, worker and dev take the benchmark role too
	TaskQueue, Deployment string   // COMMITLAYER_BENCHMARK_TASK_QUEUE, COMMITLAYER_BENCHMARK_DEPLOYMENT
	Dir                   string   // COMMITLAYER_SANDBOX_DIR
	QueryConnectors       []string // COMMITLAYER_SANDBOX_QUERY_CONNECTORS
}

// DefaultDatabaseURL is the local development database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/commitlayer?sslmode=disable"

// LoadConfig reads the configuration with getenv. A value of the wrong
// form is an error naming its variable; what a role requires is Check's.
func LoadConfig(getenv func(string) string) (Config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	var errs []error
	c := Config{
		Addr:        env("COMMITLAYER_ADDR", "127.0.0.1:8080"),
		DatabaseURL: env("DATABASE_URL", DefaultDatabaseURL),
		AdminKey:    getenv("COMMITLAYER_ADMIN_KEY"),
		TaskQueue:   env("COMMITLAYER_TASK_QUEUE", workflows.TaskQueue),
		Deployment:  env("COMMITLAYER_DEPLOYMENT", worker.DefaultDeployment),
		BuildID:     env("COMMITLAYER_BUILD_ID", worker.CurrentBuild().ID),
		MetricsAddr: env("COMMITLAYER_METRICS_ADDR", ""),
		CPUProfile:  getenv("COMMITLAYER_CPUPROFILE"),
		APIURL:      env("COMMITLAYER_URL", "http://127.0.0.1:8080"),
		APIKey:      getenv("COMMITLAYER_API_KEY"),
		Sandbox:     SandboxConfig{Dir: env("COMMITLAYER_SANDBOX_DIR", filepath.Join(".data", "sandbox"))},
	}
	c.Sandbox.TaskQueue = env("COMMITLAYER_BENCHMARK_TASK_QUEUE", c.TaskQueue+"-benchmark")
	c.Sandbox.Deployment = env("COMMITLAYER_BENCHMARK_DEPLOYMENT", c.Deployment+"-benchmark")
	flag := func(name string, def bool) bool {
		switch v := strings.ToLower(env(name, "")); v {
		case "":
			return def
		case "1", "on", "true":
			return true
		case "0", "off", "false":
			return false
		default:
			errs = append(errs, fmt.Errorf("%s is 1 or 0, got %q", name, v))
			return def
		}
	}
	c.Versioning = flag("COMMITLAYER_WORKER_VERSIONING", true)
	c.IgnoreMissingQueues = flag("COMMITLAYER_IGNORE_MISSING_TASK_QUEUES", false)
	c.MetricsAdmin = flag("COMMITLAYER_METRICS_ADMIN", false)
	c.Sandbox.Enabled = flag("COMMITLAYER_BENCHMARKS", false)
	duration := func(name string, def, least time.Duration, example string) time.Duration {
		s := env(name, "")
		if s == "" {
			return def
		}
		d, err := time.ParseDuration(s)
		if err == nil && d >= least {
			return d
		}
		what := "a duration of at least " + least.String()
		switch least {
		case 0:
			what = "a duration of 0 or more"
		case time.Nanosecond:
			what = "a positive duration"
		}
		errs = append(errs, fmt.Errorf("%s %q is not %s (e.g. %s)", name, s, what, example))
		return def
	}
	c.PollInterval = duration("COMMITLAYER_POLL_INTERVAL", 0, time.Nanosecond, "1m")
	c.MaxFutureSkew = duration("COMMITLAYER_MAX_FUTURE_SKEW", api.DefaultMaxFutureSkew, time.Nanosecond, "24h")
	if s := env(envFactRetention, "0"); s != "0" {
		c.FactRetention = duration(envFactRetention, 0, minFactRetention, "2160h; above the longest settlement + watch + limit window of your contracts")
	}
	c.Dormancy = workflows.DefaultDormancy
	switch s := strings.ToLower(env("COMMITLAYER_DORMANT_AFTER", "")); s {
	case "":
	case "off", "0":
		c.Dormancy = workflows.Dormancy{}
	default:
		if c.Dormancy.MinWait = duration("COMMITLAYER_DORMANT_AFTER", 0, 0, "10m"); c.Dormancy.MinWait == 0 {
			c.Dormancy = workflows.Dormancy{}
		}
	}
	if c.Dormancy.Enabled() {
		// A notice decided before half of it must still find the
		// verification awake (workflows.Dormancy.WakeByStart).
		c.Dormancy.MinAge = duration("COMMITLAYER_DORMANT_MIN_AGE", c.Dormancy.MinAge, 2*time.Second, "2m")
	}
	var err error
	c.makeCurrentSet = env("COMMITLAYER_MAKE_CURRENT", "") != ""
	if c.MakeCurrent, err = worker.ParseCurrentPolicy(getenv("COMMITLAYER_MAKE_CURRENT")); err != nil {
		errs = append(errs, err)
	}
	if c.StickyCacheSize, err = worker.StickyCacheSizeFromEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	if c.Guard, err = netguard.FromEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	if c.TrustedProxies, err = api.ParseProxies(getenv("COMMITLAYER_TRUSTED_PROXIES")); err != nil {
		errs = append(errs, fmt.Errorf("COMMITLAYER_TRUSTED_PROXIES: %w", err))
	}
	switch c.Secrets, err = secrets.FromEnv(getenv); {
	case errors.Is(err, secrets.ErrNoKey): // connector kinds that keep a credential are refused
	case err != nil:
		errs = append(errs, fmt.Errorf("%s: %w", secrets.EnvKey, err))
	}
	if v := env("COMMITLAYER_LOG_LEVEL", ""); v != "" {
		c.logLevelSet = true
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("COMMITLAYER_LOG_LEVEL is debug, info, warn or error, got %q", v))
		}
	}
	if c.Sandbox.QueryConnectors, err = harness.ParseQueryConnectors(getenv(harness.EnvQueryConnectors)); err != nil {
		errs = append(errs, err)
	}
	if c.Temporal, err = envconfig.LoadDefaultClientOptions(); err != nil {
		errs = append(errs, fmt.Errorf("temporal configuration: %w", err))
	}
	c.Temporal.HostPort = cmpOr(c.Temporal.HostPort, client.DefaultHostPort)
	c.Temporal.Namespace = cmpOr(c.Temporal.Namespace, client.DefaultNamespace)
	c.TemporalUI = env("COMMITLAYER_TEMPORAL_UI", temporalUIOf(c.Temporal.HostPort))
	if err := c.checkQueues(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// checkQueues refuses a benchmark queue or deployment that is the
// product's (a product worker must never be handed a benchmark task), and
// deployment names Temporal would refuse.
func (c Config) checkQueues() error {
	if c.Sandbox.TaskQueue == c.TaskQueue {
		return fmt.Errorf("COMMITLAYER_BENCHMARK_TASK_QUEUE must differ from COMMITLAYER_TASK_QUEUE (%q): a product worker must never be handed a benchmark task", c.TaskQueue)
	}
	if c.Sandbox.Deployment == c.Deployment {
		return fmt.Errorf("COMMITLAYER_BENCHMARK_DEPLOYMENT must differ from COMMITLAYER_DEPLOYMENT (%q)", c.Deployment)
	}
	for _, d := range []worker.Deployment{c.productDeployment(), c.benchmarkDeployment()} {
		if err := d.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Check refuses a configuration the roles cannot run with: an API needs an
// admin key of at least 16 characters.
func (c Config) Check(roles Roles) error {
	if roles.API && len(c.AdminKey) < 16 {
		return errors.New("COMMITLAYER_ADMIN_KEY must be set to a secret of at least 16 characters")
	}
	return nil
}

// temporalUIOf is the Temporal Web UI's root next to a frontend: port 8233
// of its host.
func temporalUIOf(hostPort string) string {
	host, _, _ := net.SplitHostPort(hostPort)
	if host == "" || host == "127.0.0.1" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, "8233")
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
	return worker.Deployment{Name: c.Sandbox.Deployment, BuildID: c.BuildID, IgnoreMissingQueues: true}
}

// oneMachine makes `always` the policy of a one-machine command (dev,
// demo, sandbox) unless COMMITLAYER_MAKE_CURRENT says otherwise.
func (c *Config) oneMachine() {
	if !c.makeCurrentSet {
		c.MakeCurrent = worker.CurrentAlways
	}
}
