package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/worker"
)

// versionCmd is `commitlayer version`: the module version, the build ID
// this binary's workers register as (COMMITLAYER_BUILD_ID overrides it),
// and where the ID came from.
func versionCmd(cfg Config, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: commitlayer version")
		return 2
	}
	b := worker.CurrentBuild()
	id, source := b.ID, b.Source
	if cfg.BuildID != b.ID {
		id, source = cfg.BuildID, "COMMITLAYER_BUILD_ID"
	}
	fmt.Fprintf(stdout, "commitlayer %s\nbuild ID %s (%s)\ndeployment %s\n%s\n", b.Version, id, source, cfg.Deployment, b.GoVersion)
	return 0
}

const deployUsage = `usage: commitlayer deploy <command> [flags]

Worker Deployment rollouts (Temporal Worker Versioning), on the namespace the
TEMPORAL_* variables name. See docs/operations.md, "Rolling out a new worker build".

commands:
  describe                      the deployment's current and ramping builds, each version's drainage
  ramp -build-id B -percent P   send P % of new workflows to build B (-percent 0 -build-id "" ends the ramp)
  set-current -build-id B       make build B current (the previous one starts draining)
  wait-drained -build-id B      wait until no pinned workflow is open on build B (then stop its workers)

flags (every command):
  -name N        the deployment (default COMMITLAYER_DEPLOYMENT or commitlayer)
  -benchmark     the benchmark's deployment (<name>-benchmark) instead
`

// deployCmd is `commitlayer deploy …`: the worker package's rollout calls.
func deployCmd(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	fs := flag.NewFlagSet("commitlayer deploy "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "deployment name (default COMMITLAYER_DEPLOYMENT or commitlayer)")
	benchmark := fs.Bool("benchmark", false, "the benchmark's deployment (<name>-benchmark)")
	buildID := fs.String("build-id", "", "the build")
	percent := fs.Float64("percent", -1, "ramp percentage, 0-100")
	timeout := fs.Duration("timeout", 30*time.Minute, "wait-drained: give up after this long")
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "commitlayer deploy %s: "+format+"\n", append([]any{sub}, a...)...)
		return 2
	}
	switch {
	case sub == "" || sub == "-h" || sub == "help" || sub == "--help":
		fmt.Fprint(stdout, deployUsage)
		return map[bool]int{true: 2, false: 0}[sub == ""]
	case sub != "describe" && sub != "ramp" && sub != "set-current" && sub != "wait-drained":
		fmt.Fprintf(stderr, "commitlayer deploy: unknown command %q\n\n%s", sub, deployUsage)
		return 2
	case fs.Parse(args[1:]) != nil:
		return 2
	case fs.NArg() > 0:
		return bad("unexpected arguments %v", fs.Args())
	case sub == "ramp" && (*percent < 0 || *percent > 100):
		return bad("-percent is a number from 0 to 100")
	case strings.TrimSpace(*buildID) == "" && (sub == "set-current" || sub == "wait-drained" || sub == "ramp" && *percent > 0):
		return bad("-build-id is required")
	}
	target := cfg.productDeployment()
	if *benchmark {
		target = cfg.benchmarkDeployment()
	}
	if *name != "" {
		target.Name = *name + map[bool]string{true: "-benchmark"}[*benchmark]
	}
	target.BuildID = strings.TrimSpace(*buildID)
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := client.DialContext(dctx, cfg.Temporal)
	cancel()
	if err != nil {
		logger.Error("connect to Temporal", "address", cfg.Temporal.HostPort, "error", err)
		return 1
	}
	defer c.Close()
	dep := target.Name
	switch sub {
	case "describe":
		var st worker.DeploymentState
		if st, err = worker.DescribeDeployment(ctx, c, dep); err == nil {
			printDeployment(stdout, st)
		}
	case "set-current":
		if err = worker.SetCurrent(ctx, c, target, "commitlayer deploy"); err == nil {
			fmt.Fprintf(stdout, "%s: build %s is current\n", dep, target.BuildID)
		}
	case "ramp":
		if err = worker.SetRamping(ctx, c, target, float32(*percent), "commitlayer deploy"); err == nil {
			fmt.Fprintf(stdout, "%s: build %q ramping at %v%%\n", dep, target.BuildID, *percent)
		}
	case "wait-drained":
		wctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if err = worker.WaitDrained(wctx, c, dep, target.BuildID, 2*time.Second); err == nil {
			fmt.Fprintf(stdout, "%s: build %s is drained; its workers may stop\n", dep, target.BuildID)
		}
	}
	if err != nil {
		logger.Error("commitlayer deploy "+sub, "deployment", dep, "error", err)
		return 1
	}
	return 0
}

func printDeployment(w io.Writer, st worker.DeploymentState) {
	fmt.Fprintf(w, "deployment %s\n  current  %s\n", st.Name, cmp.Or(st.Current, "none"))
	if st.Ramping != "" {
		fmt.Fprintf(w, "  ramping  %s at %v%%\n", st.Ramping, st.RampPercent)
	} else {
		fmt.Fprintf(w, "  ramping  none\n")
	}
	for _, v := range st.Versions {
		state := cmp.Or(v.Drainage, "inactive")
		switch {
		case v.Current:
			state = "current"
		case v.Ramping:
			state = fmt.Sprintf("ramping %v%%", v.RampPercent)
		}
		fmt.Fprintf(w, "  version  %-44s %s\n", v.BuildID, state)
	}
}

// Fact retention: COMMITLAYER_FACT_RETENTION (a Go duration, e.g. 2160h for
// 90 days; unset or 0 keeps every fact) makes each worker process purge,
// every retentionInterval, the facts older than that which no open
// verification reads (postgres.DB.PurgeFacts: never a fact a watching
// verification's pass reads, never a verdict). `commitlayer purge-facts`
// runs one purge now.

const (
	envFactRetention = "COMMITLAYER_FACT_RETENTION"
	// minFactRetention refuses a retention too short to outlive any sane
	// watch window: facts within it are what limits and windows count.
	minFactRetention  = time.Hour
	retentionInterval = time.Hour
)

// purgeFactsCmd is `commitlayer purge-facts [-retention D]`: one purge of
// every tenant's facts past retention, now.
func purgeFactsCmd(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("commitlayer purge-facts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ret := fs.Duration("retention", cfg.FactRetention, "drop facts older than this that no open verification reads (default "+envFactRetention+")")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *ret == 0:
		fmt.Fprintf(stderr, "commitlayer purge-facts: set -retention or %s\n", envFactRetention)
		return 2
	case *ret < minFactRetention:
		fmt.Fprintf(stderr, "commitlayer purge-facts: -retention %s is not a duration of at least %s (set it above the longest settlement + watch + limit window of your contracts, e.g. 2160h)\n", *ret, minFactRetention)
		return 2
	}
	m := &Main{Config: cfg, Logger: logger}
	defer m.Close()
	start := time.Now()
	err := m.openDB(ctx)
	if err == nil {
		var res postgres.PurgeResult
		if res, err = m.DB.PurgeFacts(ctx, *ret, start); err == nil {
			fmt.Fprintf(stdout, "purged %d facts older than %s of %d tenants in %s\n", res.Deleted, *ret, res.Tenants, time.Since(start).Round(time.Millisecond))
			return 0
		}
	}
	logger.Error("purge-facts", "error", err)
	return 1
}
