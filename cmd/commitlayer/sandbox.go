package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/recheck"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// sandboxOptions are the flags of `commitlayer sandbox` and `demo`.
type sandboxOptions struct {
	only        []string
	concurrency int
	out         string
	serve       bool
	purge       bool
	demo        bool
	payments    string
	// sinks are the experiment platforms the run's rows are logged to
	// (braintrust, langsmith); built up front so a missing key fails fast.
	sinks []sinks.Sink
	// llm is the model-driven agent's flags (sandbox_llm.go).
	llm llmOptions
	// replay, repeat and judge: see replayFlags.
	replay string
	repeat int
	judge  string
}

type listFlag struct{ list *[]string }

func (l listFlag) String() string {
	if l.list == nil {
		return ""
	}
	return strings.Join(*l.list, ",")
}

func (l listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l.list = append(*l.list, p)
		}
	}
	return nil
}

func parseSandboxFlags(name string, args []string, stderr io.Writer) (sandboxOptions, error) {
	o := sandboxOptions{concurrency: bench.DefaultScenarioConcurrency(), out: "sandbox/results"}
	fs := flag.NewFlagSet("commitlayer "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(listFlag{&o.only}, "only", "run only scenarios with these ids or id prefixes (comma-separated or repeated), e.g. refund/")
	fs.IntVar(&o.concurrency, "concurrency", o.concurrency, "scenarios run at once (default: the cores this process may use, GOMAXPROCS)")
	fs.StringVar(&o.out, "out", o.out, "directory for latest.{json,md} (latest_stripe.{json,md} with a Stripe backend; empty: don't write)")
	fs.BoolVar(&o.serve, "serve", name == "demo", "also serve the HTTP API on COMMITLAYER_ADDR while the run goes")
	fs.BoolVar(&o.purge, "purge", false, "delete the run's tenants (and their facts, actions and verdicts) at the end")
	fs.StringVar(&o.payments, "payments", stripepay.NameSandbox, "payments backend: sandbox, stripe-fake (an in-process fake Stripe) or stripe (Stripe test mode, key in "+stripepay.EnvKey+"); the Stripe ones run refund/ scenarios only and write latest_stripe.{json,md}")
	o.llm.flags(fs)
	var sinkNames string
	fs.StringVar(&sinkNames, "sinks", "", "log every scenario to these experiment platforms too: braintrust, langsmith (comma-separated; keys in BRAINTRUST_API_KEY, LANGSMITH_API_KEY); a sink that is down never fails the run")
	replayFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := checkReplayFlags(name, &o, stderr); err != nil {
		return o, err
	}
	if sinkNames != "" {
		names, err := sinks.ParseNames(sinkNames)
		if err == nil {
			o.sinks, err = sinks.FromEnv(names, os.Getenv, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		}
		if err != nil {
			fmt.Fprintf(stderr, "commitlayer %s: -sinks: %v\n", name, err)
			return o, err
		}
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.concurrency < 1 {
		return o, fmt.Errorf("-concurrency must be at least 1")
	}
	// A replay's agent flags were checked with the replay's
	// (checkReplayFlags).
	if o.replay == "" {
		if err := o.llm.check(); err != nil {
			fmt.Fprintf(stderr, "commitlayer %s: %v\n", name, err)
			return o, err
		}
	}
	o.demo = name == "demo"
	// Refuse a bad backend, a scenario it cannot run, or a missing or
	// malformed key before anything starts. The key itself stays in this
	// process's environment, where the harness's activities read it.
	if o.replay != "" {
		return o, nil // the recorded run names its scenarios and backend
	}
	if _, _, err := bench.SelectScenarios(o.payments, o.only); err != nil {
		fmt.Fprintf(stderr, "commitlayer %s: %v\n", name, err)
		return o, err
	}
	if o.payments == stripepay.NameStripe {
		if _, err := stripepay.ConfigFromEnv(os.Getenv); err != nil {
			fmt.Fprintf(stderr, "commitlayer %s: -payments stripe: %v (or use -payments stripe-fake for the in-process fake Stripe)\n", name, err)
			return o, err
		}
	}
	return o, nil
}

func sandboxCmd(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	o, err := parseSandboxFlags("sandbox", args, stderr)
	if err != nil {
		return 2
	}
	if o.llm.provider == llmFake {
		return runFakes(ctx, logger, o, stdout, stderr)
	}
	return runMatrix(ctx, logger, o, stdout, stderr)
}

func demoCmd(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	o, err := parseSandboxFlags("demo", args, stderr)
	if err != nil {
		return 2
	}
	return runMatrix(ctx, logger, o, stdout, stderr)
}

// runMatrix runs the failure matrix in this process: a worker (and the API
// when serving), a Benchmark workflow, progress while it runs, the results
// written and printed. The exit status is 1 when any scenario disagrees
// with the oracle.
func runMatrix(ctx context.Context, logger *slog.Logger, o sandboxOptions, stdout, stderr io.Writer) int {
	// A key the user supplied is never printed; one made here for this run
	// is, so the user can reach the admin routes while it runs.
	generatedKey := false
	// A via path records through this process's API: it is served, on a
	// port of its own unless -serve asked for COMMITLAYER_ADDR.
	via := o.llm.agent == agent.KindLLM && o.llm.via != "" && o.llm.via != agent.ViaDirect
	if (o.serve || via) && os.Getenv("COMMITLAYER_ADMIN_KEY") == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		os.Setenv("COMMITLAYER_ADMIN_KEY", "demo-"+hex.EncodeToString(b[:]))
		generatedKey = true
	}
	// The sandbox's systems listen on the loopback; the benchmark's own
	// wiring pulls them (no address guard there), so the process keeps the
	// production rules for everything else: the demo's product worker and
	// API refuse internal addresses unless COMMITLAYER_ALLOW_PRIVATE_ADDRESSES=1.
	// The benchmark's own workers run the run; the demo also runs a
	// product worker, so the API it serves verifies what is posted to it.
	roles := Roles{API: o.serve, Worker: o.demo, Benchmark: true, BenchmarkWorker: true}
	roles.API = roles.API || via
	cfg, err := ConfigFromEnv(roles)
	if err != nil {
		logger.Error("configuration", "error", err)
		return 1
	}
	if via && !o.serve {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg.defaultMakeCurrent()
	m := &Main{Config: cfg, Logger: quiet(logger)}
	if err := m.Open(ctx, roles); err != nil {
		logger.Error("start", "error", err)
		m.Close()
		return 1
	}
	defer m.Close()
	// This command's run executes on this build, whatever the benchmark
	// deployment's current version is.
	if d := cfg.benchmarkDeployment(); d.Versioned() {
		m.Runner.Pin = sdkworker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID}
	}

	req := o.llm.request(bench.Request{Only: o.only, Concurrency: o.concurrency, Payments: o.payments, Repeat: o.repeat, Judge: o.judge})
	if o.replay != "" {
		if req, err = replayRequest(ctx, m.Runner, o, stdout); err != nil {
			logger.Error("replay", "error", err)
			return 1
		}
	}
	started, err := m.Runner.StartRun(ctx, req)
	if err != nil {
		logger.Error("start benchmark", "error", err)
		return 1
	}
	runID := started.Run.ID
	fmt.Fprintf(stdout, "CommitLayer failure matrix: run %s, %d scenarios, %d at a time\n", runID, len(started.Scenarios), o.concurrency)
	fmt.Fprintf(stdout, "Temporal UI: %s (query: CommitLayerRun=\"%s\")\n", temporalUI(cfg), runID)
	if o.payments != stripepay.NameSandbox {
		fmt.Fprintf(stdout, "payments backend %s: %s\n", o.payments, stripepay.Notice)
	}
	if o.serve {
		if generatedKey {
			fmt.Fprintf(stdout, "API: %s (admin key for this run: %s)\n", m.URL(), cfg.AdminKey)
		} else {
			fmt.Fprintf(stdout, "API: %s (admin key: the COMMITLAYER_ADMIN_KEY you set)\n", m.URL())
		}
	}
	last := -1
	res, err := m.Runner.Wait(ctx, runID, time.Second, func(p bench.Progress) {
		if p.Done == last {
			return
		}
		last = p.Done
		fmt.Fprintf(stderr, "[%3d/%d] %d disagree; running: %s\n", p.Done, p.Total, len(p.Disagree),
			strings.Join(p.Running, " "))
	})
	if err != nil {
		logger.Error("benchmark", "run", runID, "error", err)
		return 1
	}
	results := report.NewResults(gitCommit(), res.StartedAt, res.FinishedAt, o.concurrency, res.Rows)
	report.SetPayments(&results, o.payments)
	if o.out != "" && started.Agent != nil {
		if err := writeLLMResults(o.out, results, started, res, stdout); err != nil {
			logger.Error("write results", "error", err)
			return 1
		}
	} else if o.out != "" {
		base := report.FileBase(results)
		if base != "latest" {
			compareWithSandbox(&results, filepath.Join(o.out, "latest.json"), logger)
		}
		if err := report.WriteFiles(o.out, results); err != nil {
			logger.Error("write results", "error", err)
			return 1
		}
		fmt.Fprintf(stdout, "results: %s/%s.json, %s/%s.md\n", o.out, base, o.out, base)
	}
	if o.out != "" {
		// What each scenario verified, for `commitlayer check --results`;
		// read from the run's tenants, so before any purge.
		base := report.FileBase(results)
		if started.Agent != nil {
			base = report.LLMViaFileBase(started.Agent.Provider, started.Agent.Via)
		}
		w, err := recheck.Write(ctx, m.Bench, runID, results.Commit, o.out, base, viaMains(started, res.Rows))
		if err != nil {
			logger.Error("write check bundle", "error", err)
			return 1
		}
		note := ""
		if w.Skipped > 0 {
			note = fmt.Sprintf(" (%d tenants without a verdict on a main action left out)", w.Skipped)
		}
		fmt.Fprintf(stdout, "check bundle: %s, %d scenarios%s; verify again with: commitlayer check --results %s\n",
			w.Path, w.Scenarios, note, filepath.Join(o.out, base+".json"))
	}
	if len(o.sinks) > 0 {
		deliverToSinks(ctx, o.sinks, runID, results, stdout, logger)
	}
	fmt.Fprintln(stdout)
	md := report.Markdown(results)
	if i := strings.Index(md, "\n## Scenarios"); i >= 0 {
		md = md[:i+1] // the summary and the groups; the per-scenario table is in latest.md
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stdout, "\nwall time %.1fs · Temporal UI: %s\n", results.WallSeconds, temporalUI(cfg))
	if o.purge {
		if n, err := m.Bench.PurgeBenchmarkTenants(ctx, runID); err != nil {
			logger.Error("purge", "run", runID, "error", err)
		} else {
			fmt.Fprintf(stdout, "purged the run's %d tenants\n", n)
		}
	}
	disagree := 0
	for _, r := range res.Rows {
		if !r.Agree.Both() {
			disagree++
			fmt.Fprintf(stdout, "DISAGREE %s: truth %s/%s, verdict %s/%s %s\n", r.ID, r.Truth.Outcome, r.Truth.Policy,
				r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy, r.Error)
		}
	}
	if disagree > 0 {
		return 1
	}
	return 0
}

// compareWithSandbox compares a Stripe run's rows with the sandbox
// matrix's results in path, when there are any.
func compareWithSandbox(res *matrix.Results, path string, logger *slog.Logger) {
	b, err := os.ReadFile(path)
	if err != nil {
		return // no sandbox results to compare with
	}
	var sb matrix.Results
	if err := json.Unmarshal(b, &sb); err != nil {
		logger.Warn("compare with the sandbox results", "path", path, "error", err)
		return
	}
	report.CompareWithSandbox(res, sb)
}

// quiet keeps interactive runs to errors: the matrix makes systems
// unreachable on purpose, and each such pull is a warning.
func quiet(l *slog.Logger) *slog.Logger {
	if os.Getenv("COMMITLAYER_LOG_LEVEL") != "" {
		return l
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func temporalUI(cfg Config) string {
	if u := os.Getenv("TEMPORAL_UI_URL"); u != "" {
		return u
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows", temporalUIBase(cfg), cfg.Temporal.Namespace)
}

// temporalUIBase is the Temporal Web UI's root next to the frontend
// (TEMPORAL_UI_BASE overrides it).
func temporalUIBase(cfg Config) string {
	if u := os.Getenv("TEMPORAL_UI_BASE"); u != "" {
		return u
	}
	host := cfg.Temporal.HostPort
	if i := strings.LastIndex(host, ":"); i >= 0 {
		host = host[:i]
	}
	if host == "" || host == "127.0.0.1" || host == "localhost" {
		host = "localhost"
	}
	return fmt.Sprintf("http://%s:8233", host)
}

// gitCommit names the commit the results come from ("unknown" outside a
// checkout), marked "+dirty" when the tree has changes.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}

// sinkTimeout bounds the delivery to the experiment platforms at the end of
// a run; what did not arrive by then is reported, and the run stands.
const sinkTimeout = 2 * time.Minute

// deliverToSinks logs the run as one experiment on each sink and prints
// what arrived. A sink that is down is reported, never a failed run.
func deliverToSinks(ctx context.Context, ss []sinks.Sink, runID string, results matrix.Results, stdout io.Writer, logger *slog.Logger) {
	raw, err := json.Marshal(results)
	if err != nil {
		logger.Error("sinks: encode results", "error", err)
		return
	}
	run, err := matrix.Decode(raw)
	if err != nil {
		logger.Error("sinks: decode results", "error", err)
		return
	}
	run.ID = runID
	dctx, cancel := context.WithTimeout(ctx, sinkTimeout)
	defer cancel()
	for _, rep := range sinks.DeliverAll(dctx, ss, run, run.Scenarios) {
		status := "all arrived"
		if !rep.OK() {
			status = fmt.Sprintf("%d did not arrive", rep.Missing())
		}
		fmt.Fprintf(stdout, "sink %s (%s)\n", rep, status)
	}
}
