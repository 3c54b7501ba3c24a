// Command commitlayer is CommitLayer's one binary:
//
//	commitlayer api                 the HTTP API
//	commitlayer worker              the Temporal worker
//	commitlayer dev                 api and worker in one process
//	commitlayer migrate             apply the database migrations
//	commitlayer purge-facts         drop facts past COMMITLAYER_FACT_RETENTION no open verification reads
//	commitlayer contracts lint F…   check contract files
//	commitlayer sandbox [flags]     run the failure matrix
//	commitlayer demo                the main job on the embedded defaults
//	commitlayer bench verify|settle measure latency and throughput
//	commitlayer mcp [flags]         the MCP gateway recording bound tool calls
//	commitlayer version             the version and the build ID
//	commitlayer deploy …            Worker Deployment rollouts
//
// Configuration comes from the environment: COMMITLAYER_ADDR, DATABASE_URL,
// COMMITLAYER_ADMIN_KEY and the standard TEMPORAL_* variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/commitlayer/commitlayer/contracts"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: commitlayer <command> [arguments]

commands:
  api                  serve the HTTP API
  worker               run the Temporal worker
  dev                  api and worker in one process (its build made the deployment's current version)
  version              print the version and the build ID its workers register as
  deploy describe|ramp|set-current|wait-drained
                       Worker Deployment rollouts (see commitlayer deploy -h, docs/operations.md)
  migrate              apply the database migrations and exit
  purge-facts [-retention D]
                       drop facts older than D (default COMMITLAYER_FACT_RETENTION) that no open verification reads
  contracts lint F...  check contract files (exit 1 when one is invalid)
  sandbox [flags]      run the sandbox failure matrix (see commitlayer sandbox -h)
  demo                 start everything on the embedded defaults and run the matrix
  bench verify|settle  measure POST → verdict latency and settlement throughput on the local services,
                       next to a same-run no-op baseline (-workers N: N worker processes)
  bench scale          how a verification's cost grows with facts, open verifications and ingest (ratios last)
  mcp [flags]          an MCP gateway in front of an MCP server: bound tool calls recorded as actions (see commitlayer mcp -h)
  check [flags]        verify actions against facts and contracts from files, no server (CI; exit 0/1/2/3)

environment:
  COMMITLAYER_ADDR       listen address (default 127.0.0.1:8080)
  DATABASE_URL           PostgreSQL URL (default postgres://postgres@127.0.0.1:5432/commitlayer?sslmode=disable)
  COMMITLAYER_ADMIN_KEY  key for /v1/admin routes (required by api and dev)
  COMMITLAYER_FACT_RETENTION workers purge, hourly, facts older than this no open verification reads (e.g. 2160h; unset keeps all)
  COMMITLAYER_BENCHMARKS 1: api, worker and dev also run sandbox benchmark runs (demo and sandbox always do)
  COMMITLAYER_DEPLOYMENT Worker Deployment name (default commitlayer; the benchmark's: <name>-benchmark)
  COMMITLAYER_BUILD_ID   this build's ID (default the binary's VCS revision; commitlayer version prints it)
  COMMITLAYER_MAKE_CURRENT auto (default: when the deployment has no current version), always, never
  COMMITLAYER_CPUPROFILE write this process's CPU profile to this file while the command runs (go tool pprof)
  TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_* (see docs/operations.md)
`

// run executes one command and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))
	slog.SetDefault(logger)
	stopProfile, err := startCPUProfile()
	if err != nil {
		logger.Error("commitlayer", "error", err)
		return 1
	}
	defer stopProfile()
	switch args[0] {
	case "api":
		err = serve(ctx, logger, Roles{API: true, Benchmark: benchmarksEnabled()}, false)
	case "worker":
		b := benchmarksEnabled()
		err = serve(ctx, logger, Roles{Worker: true, Benchmark: b, BenchmarkWorker: b}, false)
	case "dev":
		b := benchmarksEnabled()
		err = serve(ctx, logger, Roles{API: true, Worker: true, Benchmark: b, BenchmarkWorker: b}, true)
	case "version":
		return versionCmd(args[1:], stdout, stderr)
	case "deploy":
		return deployCmd(ctx, logger, args[1:], stdout, stderr)
	case "migrate":
		err = migrate(ctx, logger)
	case "purge-facts":
		return purgeFactsCmd(ctx, logger, args[1:], stdout, stderr)
	case "contracts":
		if len(args) < 3 || args[1] != "lint" {
			fmt.Fprint(stderr, "usage: commitlayer contracts lint FILE...\n")
			return 2
		}
		if !contracts.Lint(stdout, args[2:]) {
			return 1
		}
		return 0
	case "sandbox":
		return sandboxCmd(ctx, logger, args[1:], stdout, stderr)
	case "demo":
		return demoCmd(ctx, logger, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, logger, args[1:], stdout, stderr)
	case "check":
		return checkCmd(args[1:], stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, logger, args[1:], stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "commitlayer: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("commitlayer "+args[0], "error", err)
		return 1
	}
	return 0
}

// benchmarksEnabled reports COMMITLAYER_BENCHMARKS=1: the api, worker and
// dev commands then also serve and run sandbox benchmark runs.
func benchmarksEnabled() bool { return os.Getenv("COMMITLAYER_BENCHMARKS") == "1" }

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("COMMITLAYER_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

// serve runs the API and/or the worker until ctx ends; oneMachine (dev)
// makes this build its deployments' current version at start.
func serve(ctx context.Context, logger *slog.Logger, roles Roles, oneMachine bool) error {
	cfg, err := ConfigFromEnv(roles)
	if err != nil {
		return err
	}
	if oneMachine {
		cfg.defaultMakeCurrent()
	}
	m := &Main{Config: cfg, Logger: logger}
	if err := m.Open(ctx, roles); err != nil {
		m.Close()
		return err
	}
	defer m.Close()
	return m.Wait(ctx)
}

func migrate(ctx context.Context, logger *slog.Logger) error {
	cfg, err := ConfigFromEnv(Roles{})
	if err != nil {
		return err
	}
	m := &Main{Config: cfg, Logger: logger}
	defer m.Close()
	if err := m.openDB(ctx); err != nil {
		return err
	}
	logger.Info("migrations applied")
	return nil
}
