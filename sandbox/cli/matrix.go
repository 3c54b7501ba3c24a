package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/recheck"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// Matrix runs the failure matrix on a process with the benchmark role.
type Matrix struct {
	Node *Node
	// Workflows is the Temporal UI's list of the namespace's workflows.
	Workflows string
	// API is the process's API when it serves one; AdminKey is shown with
	// it only when KeyMade (made for this run, not the user's).
	API, AdminKey string
	KeyMade       bool
	Logger        *slog.Logger
}

// Run starts a run, shows its progress, writes its results (Options.Out),
// its check bundle and its sinks' experiments, prints the summary, purges
// its tenants when asked. It returns the exit status: 1 when a scenario
// disagrees with the oracle or the run could not be made.
func (m Matrix) Run(ctx context.Context, o Options, stdout, stderr io.Writer) int {
	runner, log := m.Node.Runner, m.Logger
	req := o.request()
	if o.Replay != "" {
		var err error
		if req, err = replayRequest(ctx, runner, o, stdout); err != nil {
			log.Error("replay", "error", err)
			return 1
		}
	}
	started, err := runner.StartRun(ctx, req)
	if err != nil {
		log.Error("start benchmark", "error", err)
		return 1
	}
	runID := started.Run.ID
	fmt.Fprintf(stdout, "CommitLayer failure matrix: run %s, %d scenarios, %d at a time\n", runID, len(started.Scenarios), o.Concurrency)
	fmt.Fprintf(stdout, "Temporal UI: %s (query: CommitLayerRun=\"%s\")\n", m.Workflows, runID)
	if o.Payments != stripepay.NameSandbox {
		fmt.Fprintf(stdout, "payments backend %s: %s\n", o.Payments, stripepay.Notice)
	}
	if o.Serve {
		key := "the COMMITLAYER_ADMIN_KEY you set"
		if m.KeyMade {
			key = "for this run: " + m.AdminKey
		}
		fmt.Fprintf(stdout, "API: %s (admin key %s)\n", m.API, key)
	}
	last := -1
	res, err := runner.Wait(ctx, runID, time.Second, func(p bench.Progress) {
		if p.Done != last {
			last = p.Done
			fmt.Fprintf(stderr, "[%3d/%d] %d disagree; running: %s\n", p.Done, p.Total, len(p.Disagree), strings.Join(p.Running, " "))
		}
	})
	if err != nil {
		log.Error("benchmark", "run", runID, "error", err)
		return 1
	}
	results := report.NewResults(gitCommit(), res.StartedAt, res.FinishedAt, o.Concurrency, res.Rows)
	report.SetPayments(&results, o.Payments)
	if o.Out != "" {
		if err := m.write(ctx, o.Out, results, started, res, stdout); err != nil {
			log.Error("write results", "error", err)
			return 1
		}
	}
	if len(o.sinks) > 0 {
		deliverToSinks(ctx, o.sinks, runID, results, stdout, log)
	}
	fmt.Fprintln(stdout)
	md := report.Markdown(results)
	if i := strings.Index(md, "\n## Scenarios"); i >= 0 {
		md = md[:i+1] // the summary and the groups; the per-scenario table is in latest.md
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stdout, "\nwall time %.1fs · Temporal UI: %s\n", results.WallSeconds, m.Workflows)
	if o.Purge {
		if n, err := m.Node.Store.PurgeBenchmarkTenants(ctx, runID); err != nil {
			log.Error("purge", "run", runID, "error", err)
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
	return min(disagree, 1)
}

// write writes the run's results files into dir (latest.{json,md,html},
// latest_stripe… or llm_<provider>…) and, beside them, the check bundle of
// what each scenario verified, read from the run's tenants (so before any
// purge), for `commitlayer check --results`.
func (m Matrix) write(ctx context.Context, dir string, results matrix.Results, started bench.Started, res bench.BenchmarkResult, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := report.FileBase(results)
	if started.Agent != nil {
		lr := report.NewLLMResults(results, *started.Agent, started.Skipped, res.NotRun)
		if err := report.WriteLLMFiles(dir, lr); err != nil {
			return err
		}
		base = report.LLMViaFileBase(started.Agent.Provider, started.Agent.Via)
		a := lr.Agent
		fmt.Fprintf(stdout, "results: %s/%s.json, %s/%s.md\n", dir, base, dir, base)
		fmt.Fprintf(stdout, "model-driven agent %s (%s): %d applicable, %d skipped, %d not run; %d turns, %d+%d tokens, %d agent errors\n",
			a.Provider, a.Model, a.Applicable, len(a.Skipped), len(a.NotRun), a.Turns, a.InputTokens, a.OutputTokens, a.AgentErrors)
	} else {
		if base != "latest" {
			compareWithSandbox(&results, filepath.Join(dir, "latest.json"), m.Logger)
		}
		if err := report.WriteFiles(dir, results); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "results: %s/%s.json, %s/%s.md\n", dir, base, dir, base)
	}
	w, err := recheck.Write(ctx, m.Node.Store, started.Run.ID, results.Commit, dir, base, viaMains(started, res.Rows))
	if err != nil {
		return fmt.Errorf("check bundle: %w", err)
	}
	note := ""
	if w.Skipped > 0 {
		note = fmt.Sprintf(" (%d tenants without a verdict on a main action left out)", w.Skipped)
	}
	fmt.Fprintf(stdout, "check bundle: %s, %d scenarios%s; verify again with: commitlayer check --results %s\n",
		w.Path, w.Scenarios, note, filepath.Join(dir, base+".json"))
	return nil
}

// viaMains names the task action of each row of a via run (action id →
// scenario id) for the check bundle; nil for a run the harness recorded.
func viaMains(started bench.Started, rows []matrix.Row) map[string]string {
	if started.Agent == nil || started.Agent.Via == "" {
		return nil
	}
	mains := map[string]string{}
	for _, r := range rows {
		if r.LLM != nil && !r.LLM.NoAction && len(r.LLM.ViaActions) > 0 {
			mains[r.LLM.ViaActions[0]] = r.ID
		}
	}
	return mains
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

// replayRequest is the request replaying o.Replay: a run id as it is, or a
// results file imported as a stored run first.
func replayRequest(ctx context.Context, r *bench.Runner, o Options, stdout io.Writer) (bench.Request, error) {
	req := bench.Request{Concurrency: o.Concurrency, ReplayOf: o.Replay}
	if !looksLikeFile(o.Replay) {
		return req, nil
	}
	b, err := os.ReadFile(o.Replay)
	if err != nil {
		return req, fmt.Errorf("read %s: %w", o.Replay, err)
	}
	var res matrix.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return req, fmt.Errorf("read %s: %w", o.Replay, err)
	}
	run, err := r.ImportResults(ctx, o.Replay, res)
	if err != nil {
		return req, err
	}
	fmt.Fprintf(stdout, "imported %s (commit %s, %d scenarios) as run %s\n", o.Replay, res.Commit, len(res.Scenarios), run.ID)
	req.ReplayOf = run.ID
	return req, nil
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
