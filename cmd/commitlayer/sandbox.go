package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/cli"
	"github.com/commitlayer/commitlayer/sandbox/loadtest"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
	"github.com/commitlayer/commitlayer/worker"
)

// localResults is where a run's results go unless -out says otherwise: an
// ignored directory (`make results` writes the committed sandbox/results).
const localResults = ".data/results"

// parseSandboxFlags reads the flags of `commitlayer sandbox` and `demo`
// into the matrix's options and checks them (cli.Options.Check) before
// anything starts.
func parseSandboxFlags(name string, args []string, stderr io.Writer) (cli.Options, error) {
	o := cli.Options{Concurrency: bench.DefaultScenarioConcurrency(), Out: localResults}
	fs := flag.NewFlagSet("commitlayer "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Func("only", "run only scenarios with these ids or id prefixes (comma-separated or repeated), e.g. refund/", o.AddOnly)
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "scenarios run at once (default: the cores this process may use, GOMAXPROCS)")
	fs.StringVar(&o.Out, "out", o.Out, "directory for latest.{json,md,html} and the check bundle (latest_stripe… with a Stripe backend, llm_<provider>… with -agent llm; empty: don't write)")
	fs.BoolVar(&o.Serve, "serve", name == "demo", "also serve the HTTP API on COMMITLAYER_ADDR while the run goes")
	fs.BoolVar(&o.Purge, "purge", false, "delete the run's tenants (and their facts, actions and verdicts) at the end")
	fs.StringVar(&o.Payments, "payments", stripepay.NameSandbox, "payments backend: sandbox, stripe-fake (an in-process fake Stripe) or stripe (Stripe test mode, key in "+stripepay.EnvKey+"); the Stripe ones run refund/ scenarios only")
	fs.StringVar(&o.SinkNames, "sinks", "", "log every scenario to these experiment platforms too: braintrust, langsmith (comma-separated; keys in BRAINTRUST_API_KEY, LANGSMITH_API_KEY); a sink that is down never fails the run")
	fs.StringVar(&o.Agent, "agent", bench.AgentScripted, "the agent: scripted, llm (a model drives the same tools; needs -provider) or replay (the calls of the run -replay names re-sent)")
	fs.StringVar(&o.Provider, "provider", "", "the model provider of -agent llm: anthropic, openai, google (key in ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY), "+
		"fake-anthropic, fake-openai, fake-google (an in-process fake of that provider's API, spoken to through its SDK), or fake (the three fakes in turn)")
	fs.StringVar(&o.Model, "model", "", "the model of -agent llm (default: the provider's default model)")
	fs.IntVar(&o.MaxTurns, "max-turns", agent.DefaultMaxTurns, "model turns per scenario")
	fs.IntVar(&o.MaxTokens, "max-tokens", agent.DefaultMaxTokens, "output tokens per model turn")
	fs.StringVar(&o.Via, "via", agent.ViaDirect, "who records the -agent llm agent's actions: direct (the harness), mcp (CommitLayer's MCP gateway in front of its tools) or otlp (its tool calls exported as spans to the API's /v1/traces)")
	fs.Int64Var(&o.TokenBudget, "token-budget", 0, "tokens (input plus output) the run may use; once spent, the scenarios left are listed as not run (0: no limit)")
	fs.StringVar(&o.Replay, "replay", "", "replay a recorded run instead (a run id, or a results file such as sandbox/results/latest.json): its tool calls re-executed on fresh enterprises under the same chaos, no model called")
	fs.IntVar(&o.Repeat, "repeat", 0, fmt.Sprintf("run each scenario this many times, each on a fresh enterprise, and report pass^k (at most %d)", bench.MaxRepeat))
	fs.StringVar(&o.Judge, "judge", "", "add the model judge: a provider (anthropic, openai, google) or provider/model; its key is read from this process's environment")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	err := o.Check(os.Getenv, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err != nil {
		fmt.Fprintf(stderr, "commitlayer %s: %v\n", name, err)
	}
	return o, err
}

// sandboxCmd is `commitlayer sandbox` and `demo`: the matrix in this
// process (its benchmark workers, and the API when serving or recording
// through it; demo also runs a product worker, so the API it serves
// verifies what is posted to it). The exit status is 1 when any scenario
// disagrees with the oracle.
func sandboxCmd(ctx context.Context, cfg Config, logger *slog.Logger, name string, args []string, stdout, stderr io.Writer) int {
	o, err := parseSandboxFlags(name, args, stderr)
	if err != nil {
		return 2
	}
	if name == "demo" {
		return runMatrix(ctx, cfg, logger, true, o, stdout, stderr)
	}
	rc := 0
	for _, one := range o.Fakes() {
		if one.Provider != o.Provider {
			fmt.Fprintf(stdout, "== -provider %s\n", one.Provider)
		}
		rc = max(rc, runMatrix(ctx, cfg, logger, false, one, stdout, stderr))
	}
	return rc
}

func runMatrix(ctx context.Context, cfg Config, logger *slog.Logger, demo bool, o cli.Options, stdout, stderr io.Writer) int {
	// A via path records through this process's API: it is served, on a
	// port of its own unless -serve asked for COMMITLAYER_ADDR. A key the
	// user supplied is never printed; one made here for this run is.
	roles := Roles{API: o.Serve || o.ViaAPI(), Worker: demo, Benchmark: true, BenchmarkWorker: true}
	keyMade := roles.API && cfg.AdminKey == ""
	if keyMade {
		cfg.AdminKey = "demo-" + randomHex(16)
	}
	if o.ViaAPI() && !o.Serve {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg.oneMachine()
	m := &Main{Config: cfg, Logger: quiet(cfg, logger)}
	defer m.Close()
	if err := m.Open(ctx, roles); err != nil {
		logger.Error("start", "error", err)
		return 1
	}
	// This command's run executes on this build, whatever the benchmark
	// deployment's current version is.
	if d := cfg.benchmarkDeployment(); d.Versioned() {
		m.Bench.Runner.Pin = sdkworker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID}
	}
	return cli.Matrix{Node: m.Bench, Workflows: fmt.Sprintf("%s/namespaces/%s/workflows", cfg.TemporalUI, cfg.Temporal.Namespace),
		API: m.URL(), AdminKey: cfg.AdminKey, KeyMade: keyMade, Logger: logger}.Run(ctx, o, stdout, stderr)
}

// quiet keeps interactive runs to errors unless COMMITLAYER_LOG_LEVEL
// asks for more: the matrix makes systems unreachable on purpose, and
// each such pull is a warning.
func quiet(cfg Config, l *slog.Logger) *slog.Logger {
	if cfg.logLevelSet {
		return l
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// benchCmd is `commitlayer bench verify|settle|scale [flags]` and, for
// -workers N, `commitlayer bench worker` (one more worker process). It
// runs the API and a worker in this process on a task queue and a
// deployment of their own (made current for that queue alone: the load
// test never changes the routing of a fleet on the same namespace), the
// baselines registered beside the product's workflows.
func benchCmd(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	mode := ""
	if len(args) > 0 {
		mode = args[0]
	}
	fs := flag.NewFlagSet("commitlayer bench "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var run func(context.Context, *loadtest.Stack, io.Writer) error
	switch mode {
	case "worker": // one more process of -workers N: a worker with the baselines, until signalled
		m := benchMain(cfg, logger)
		defer m.Close()
		err := openBench(ctx, m, Roles{Worker: true})
		if err == nil {
			err = m.Wait(ctx)
		}
		return map[bool]int{true: 1}[err != nil && ctx.Err() == nil]
	case "verify", "settle":
		c := loadtest.Config{Mode: mode}
		fs.IntVar(&c.Actions, "actions", map[string]int{"verify": 200, "settle": 500}[mode], "actions to verify")
		fs.IntVar(&c.Concurrency, "concurrency", map[string]int{"verify": 1, "settle": 32}[mode], "POSTs in flight")
		fs.DurationVar(&c.Window, "window", 5*time.Second, "settlement window (settle)")
		fs.IntVar(&c.Workers, "workers", 1, "worker processes on the bench's task queue (this one and workers-1 children)")
		run = func(ctx context.Context, s *loadtest.Stack, w io.Writer) error { return loadtest.Run(ctx, s, c, w) }
	case "scale":
		c := scaleFlags(fs)
		run = func(ctx context.Context, s *loadtest.Stack, w io.Writer) error {
			return loadtest.RunScale(ctx, s, *c, w)
		}
	default:
		fmt.Fprint(stderr, "usage: commitlayer bench verify|settle|scale [flags]\n")
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	suffix := randomHex(4)
	cfg.Addr, cfg.TaskQueue, cfg.Deployment = "127.0.0.1:0", "commitlayer-bench-"+suffix, "commitlayer-bench-"+suffix
	cfg.MakeCurrent = worker.CurrentAlways
	if cfg.AdminKey == "" {
		cfg.AdminKey = "bench-" + randomHex(8)
	}
	m := benchMain(cfg, logger)
	defer m.Close()
	err := openBench(ctx, m, Roles{API: true, Worker: true})
	if err == nil {
		err = run(ctx, benchStack(m), stdout)
	}
	if err != nil {
		logger.Error("bench "+mode, "error", err)
		return 1
	}
	return 0
}

// scaleFlags are the flags of `commitlayer bench scale`.
func scaleFlags(fs *flag.FlagSet) *loadtest.ScaleConfig {
	c := &loadtest.ScaleConfig{}
	fs.IntVar(&c.Facts, "facts", 1_000_000, "facts in the big tenant (loaded through the store's insert)")
	fs.IntVar(&c.Subjects, "subjects", 100_000, "subjects the big tenant's facts are spread over")
	fs.IntVar(&c.SmallFacts, "small-facts", 10_000, "facts in the small tenant (same facts per subject)")
	fs.IntVar(&c.Watching, "watching", 2_000, "verifications watching in the big case of open_verifications and ingest_while_watched")
	fs.IntVar(&c.SmallWatching, "small-watching", 10, "verifications watching in the small case")
	fs.IntVar(&c.Probes, "probes", 100, "verifications measured per case, one at a time")
	fs.IntVar(&c.Batches, "batches", 40, "POST /v1/facts batches per ingest case")
	fs.IntVar(&c.Batch, "batch", 1000, "facts per batch")
	fs.IntVar(&c.Burst, "burst", 10, "facts per subject in a batch (a burst on one subject)")
	fs.IntVar(&c.InFlight, "in-flight", 4, "batches in flight")
	fs.DurationVar(&c.Retention, "retention", 30*24*time.Hour, "retention of the purge timed at the big tenant's size (its facts span 90 days; skipped when other tenants of the database hold older facts)")
	fs.StringVar(&c.Profile, "profile", "", "write heap profiles of each watching case (after a GC) and CPU profiles of each ingest case to this directory (go tool pprof)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the bench's tenants and facts (default: deleted at the end)")
	fs.BoolVar(&c.EqualWork, "equal-work", true, "before the small watching case, run as many verifications as the big case has watching, each awake as long as a watcher is before it sleeps: both heaps are then taken after the same work")
	return c
}

// benchMain is the load test's process: its worker has more activity
// slots, and openBench registers the baselines on it.
func benchMain(cfg Config, logger *slog.Logger) *Main {
	return &Main{Config: cfg, Logger: quiet(cfg, logger), WorkerOptions: worker.Options{MaxConcurrentActivities: 200}}
}

func openBench(ctx context.Context, m *Main, roles Roles) error {
	if err := m.Build(ctx, roles); err != nil {
		return err
	}
	loadtest.RegisterBaselines(m.ProductWorker)
	return m.Start(ctx)
}

// benchStack is the load test's view of the process; its other worker
// processes run `commitlayer bench worker` with this process's queue and
// deployment.
func benchStack(m *Main) *loadtest.Stack {
	c := m.Config
	return &loadtest.Stack{
		URL: m.URL(), AdminKey: c.AdminKey, DB: m.DB, Temporal: m.Temporal, TaskQueue: c.TaskQueue,
		Verifier: m.Verifier, Activities: m.Activities,
		StickyCacheSize: c.StickyCacheSize, Dormancy: c.Dormancy,
		WorkerCommand: func() *exec.Cmd {
			exe, _ := os.Executable()
			cmd := exec.Command(exe, "bench", "worker")
			cmd.Env = append(os.Environ(), "COMMITLAYER_TASK_QUEUE="+c.TaskQueue, "COMMITLAYER_DEPLOYMENT="+c.Deployment,
				"COMMITLAYER_MAKE_CURRENT="+string(worker.CurrentAlways), "DATABASE_URL="+c.DatabaseURL)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			return cmd
		},
	}
}
