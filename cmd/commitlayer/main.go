// Command commitlayer is CommitLayer's one binary: flags, one
// configuration value (config.go) and wiring (app.go); each command calls
// a package: the product's, or the sandbox's (sandbox/cli, sandbox/loadtest,
// sandbox/recheck).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/commitlayer/commitlayer/check"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/sandbox/recheck"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: commitlayer <command> [arguments]

commands:
  api | worker | dev   serve the HTTP API, run the Temporal worker, or both in one process
  version              print the version and the build ID its workers register as
  deploy describe|ramp|set-current|wait-drained
                       Worker Deployment rollouts (see commitlayer deploy -h, docs/operations.md)
  migrate              apply the database migrations and exit
  purge-facts [-retention D]
                       drop facts older than D (default COMMITLAYER_FACT_RETENTION) that no open verification reads
  contracts lint F...  check contract files (exit 1 when one is invalid)
  check [flags]        verify actions against facts and contracts from files, no server (CI; exit 0/1/2/3);
                       check --results FILE verifies a sandbox run again from its bundle
  mcp [flags]          an MCP gateway in front of an MCP server: bound tool calls recorded as actions (see commitlayer mcp -h)
  sandbox [flags]      run the sandbox failure matrix (see commitlayer sandbox -h, sandbox/README.md)
  demo                 start everything on the embedded defaults and run the matrix
  bench verify|settle|scale  the load test, each figure against a baseline of the same run

configuration: the environment, docs/configuration.md (the benchmark's: sandbox/README.md)
`

// run executes one command and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cfg, cfgErr := LoadConfig(os.Getenv)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(logger)
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "contracts":
		if len(args) < 3 || args[1] != "lint" {
			fmt.Fprint(stderr, "usage: commitlayer contracts lint FILE...\n")
			return 2
		}
		if !contracts.Lint(stdout, args[2:]) {
			return 1
		}
		return 0
	case "check":
		if recheck.Asks(args[1:]) {
			return recheck.Main(args[1:], stdout, stderr)
		}
		return check.Main(args[1:], stdout, stderr)
	case "version":
		return versionCmd(cfg, args[1:], stdout, stderr)
	}
	if cfgErr != nil {
		logger.Error("configuration", "error", cfgErr)
		return 1
	}
	stopProfile, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		logger.Error("commitlayer", "error", err)
		return 1
	}
	defer stopProfile()
	var code int
	switch args[0] {
	case "api":
		err = serve(ctx, cfg, logger, Roles{API: true, Benchmark: cfg.Sandbox.Enabled})
	case "worker":
		b := cfg.Sandbox.Enabled
		err = serve(ctx, cfg, logger, Roles{Worker: true, Benchmark: b, BenchmarkWorker: b})
	case "dev":
		b := cfg.Sandbox.Enabled
		cfg.oneMachine()
		err = serve(ctx, cfg, logger, Roles{API: true, Worker: true, Benchmark: b, BenchmarkWorker: b})
	case "migrate":
		err = migrate(ctx, cfg, logger)
	case "deploy":
		code = deployCmd(ctx, cfg, logger, args[1:], stdout, stderr)
	case "purge-facts":
		code = purgeFactsCmd(ctx, cfg, logger, args[1:], stdout, stderr)
	case "mcp":
		code = mcpCmd(ctx, cfg, logger, args[1:], stderr)
	case "sandbox", "demo":
		code = sandboxCmd(ctx, cfg, logger, args[0], args[1:], stdout, stderr)
	case "bench":
		code = benchCmd(ctx, cfg, logger, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "commitlayer: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("commitlayer "+args[0], "error", err)
		return 1
	}
	return code
}

// serve runs the API and/or the worker until ctx ends.
func serve(ctx context.Context, cfg Config, logger *slog.Logger, roles Roles) error {
	if err := cfg.Check(roles); err != nil {
		return err
	}
	m := &Main{Config: cfg, Logger: logger}
	defer m.Close()
	if err := m.Open(ctx, roles); err != nil {
		return err
	}
	return m.Wait(ctx)
}

func migrate(ctx context.Context, cfg Config, logger *slog.Logger) error {
	m := &Main{Config: cfg, Logger: logger}
	defer m.Close()
	if err := m.openDB(ctx); err != nil {
		return err
	}
	logger.Info("migrations applied")
	return nil
}

// startCPUProfile writes this process's CPU profile to path while the
// command runs (COMMITLAYER_CPUPROFILE; go tool pprof reads it) and
// returns what stops it; a no-op without a path.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("COMMITLAYER_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("COMMITLAYER_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
