package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer/worker"
)

// versionCmd is `commitlayer version`: the module version, the build ID
// this binary's workers register as (COMMITLAYER_BUILD_ID overrides it),
// and where the ID came from.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: commitlayer version")
		return 2
	}
	b := worker.CurrentBuild()
	id, source := b.ID, b.Source
	if env := envOr("COMMITLAYER_BUILD_ID", ""); env != "" {
		id, source = env, "COMMITLAYER_BUILD_ID"
	}
	fmt.Fprintf(stdout, "commitlayer %s\nbuild ID %s (%s)\ndeployment %s\n%s\n",
		b.Version, id, source, envOr("COMMITLAYER_DEPLOYMENT", worker.DefaultDeployment), b.GoVersion)
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

// deployCmd is `commitlayer deploy …`.
func deployCmd(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		fmt.Fprint(stdout, deployUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	fs := flag.NewFlagSet("commitlayer deploy "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "deployment name (default COMMITLAYER_DEPLOYMENT or commitlayer)")
	benchmark := fs.Bool("benchmark", false, "the benchmark's deployment (<name>-benchmark)")
	buildID := fs.String("build-id", "", "the build")
	percent := fs.String("percent", "", "ramp percentage, 0-100")
	timeout := fs.Duration("timeout", 30*time.Minute, "wait-drained: give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "commitlayer deploy %s: unexpected arguments %v\n", sub, fs.Args())
		return 2
	}
	cfg, err := ConfigFromEnv(Roles{})
	if err != nil {
		logger.Error("configuration", "error", err)
		return 1
	}
	target := cfg.productDeployment()
	if *benchmark {
		target = cfg.benchmarkDeployment()
	}
	if *name != "" {
		target.Name = *name
		if *benchmark {
			target.Name += "-benchmark"
		}
	}
	target.BuildID = strings.TrimSpace(*buildID)
	dep := target.Name
	needBuild := func() bool {
		if strings.TrimSpace(*buildID) == "" {
			fmt.Fprintf(stderr, "commitlayer deploy %s: -build-id is required\n", sub)
			return false
		}
		return true
	}
	var run func(client.Client) error
	switch sub {
	case "describe":
		run = func(c client.Client) error {
			st, err := worker.DescribeDeployment(ctx, c, dep)
			if err != nil {
				return err
			}
			printDeployment(stdout, st)
			return nil
		}
	case "set-current":
		if !needBuild() {
			return 2
		}
		run = func(c client.Client) error {
			if err := worker.SetCurrent(ctx, c, target, "commitlayer deploy"); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: build %s is current\n", dep, *buildID)
			return nil
		}
	case "ramp":
		p, err := strconv.ParseFloat(*percent, 32)
		if err != nil || p < 0 || p > 100 {
			fmt.Fprintf(stderr, "commitlayer deploy ramp: -percent is a number from 0 to 100, got %q\n", *percent)
			return 2
		}
		if p > 0 && !needBuild() {
			return 2
		}
		run = func(c client.Client) error {
			if err := worker.SetRamping(ctx, c, target, float32(p), "commitlayer deploy"); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: build %q ramping at %v%%\n", dep, *buildID, p)
			return nil
		}
	case "wait-drained":
		if !needBuild() {
			return 2
		}
		run = func(c client.Client) error {
			wctx, cancel := context.WithTimeout(ctx, *timeout)
			defer cancel()
			if err := worker.WaitDrained(wctx, c, dep, *buildID, 2*time.Second); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: build %s is drained; its workers may stop\n", dep, *buildID)
			return nil
		}
	default:
		fmt.Fprintf(stderr, "commitlayer deploy: unknown command %q\n\n%s", sub, deployUsage)
		return 2
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := client.DialContext(dctx, cfg.Temporal)
	cancel()
	if err != nil {
		logger.Error("connect to Temporal", "address", cfg.Temporal.HostPort, "error", err)
		return 1
	}
	defer c.Close()
	if err := run(c); err != nil {
		logger.Error("commitlayer deploy "+sub, "deployment", dep, "error", err)
		return 1
	}
	return 0
}

func printDeployment(w io.Writer, st worker.DeploymentState) {
	fmt.Fprintf(w, "deployment %s\n", st.Name)
	fmt.Fprintf(w, "  current  %s\n", orNone(st.Current))
	if st.Ramping != "" {
		fmt.Fprintf(w, "  ramping  %s at %v%%\n", st.Ramping, st.RampPercent)
	} else {
		fmt.Fprintf(w, "  ramping  none\n")
	}
	for _, v := range st.Versions {
		state := v.Drainage
		switch {
		case v.Current:
			state = "current"
		case v.Ramping:
			state = fmt.Sprintf("ramping %v%%", v.RampPercent)
		case state == "":
			state = "inactive"
		}
		fmt.Fprintf(w, "  version  %-44s %s\n", v.BuildID, state)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
