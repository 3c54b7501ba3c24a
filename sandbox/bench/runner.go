package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// Store is what the runner needs from the database.
type Store interface {
	CreateBenchmarkRun(ctx context.Context, r benchstore.Run) (benchstore.Run, error)
	GetBenchmarkRun(ctx context.Context, id string) (benchstore.Run, error)
	UpdateBenchmarkRun(ctx context.Context, r benchstore.Run) error
}

// Runner starts and follows benchmark runs of the failure matrix: a
// stored run row plus a Benchmark workflow. The API's admin routes and the
// `commitlayer sandbox` command use it.
type Runner struct {
	Temporal  client.Client
	Store     Store
	TaskQueue string // defaults to TaskQueue
	// DefaultConcurrency is used when a request names none; zero means
	// DefaultScenarioConcurrency().
	DefaultConcurrency int
	// Pin, when set, pins the runs this runner starts to a Worker
	// Deployment version (the sandbox command pins its runs to its own
	// build); zero routes them to the benchmark deployment's current one.
	Pin sdkworker.WorkerDeploymentVersion
}

// MaxConcurrency bounds a run's sliding window.
const MaxConcurrency = 64

// DefaultScenarioConcurrency is a run's window when nobody names one: the
// cores this process may use (GOMAXPROCS), at most MaxConcurrency. A run
// is CPU-bound on one machine (the dev server, the worker, the scenarios'
// enterprises and PostgreSQL share it), so more scenarios at once than
// cores buys little wall time and costs every scenario its latency: on two
// cores, 4 at once ran the matrix in 17.5 s with verdicts 101 ms after the
// action, 2 at once in 18.9-21.5 s and 63-67 ms (docs/benchmarks.md,
// session 11).
func DefaultScenarioConcurrency() int {
	return min(max(runtime.GOMAXPROCS(0), 1), MaxConcurrency)
}

// Start validates the request, stores the run and starts its Benchmark
// workflow.
func (r *Runner) Start(ctx context.Context, req Request) (benchstore.Run, error) {
	run, _, err := r.start(ctx, req)
	return run, err
}

// Started is a run just started.
type Started struct {
	Run       benchstore.Run
	Scenarios []string
	Workflow  client.WorkflowRun
	// Agent is a model-driven run's agent; Skipped the scenarios it left
	// out because they script one specific agent behaviour.
	Agent   *agent.Spec
	Skipped []catalogue.Skipped
}

// StartRun is Start, also returning the scenarios and the workflow run.
func (r *Runner) StartRun(ctx context.Context, req Request) (Started, error) {
	run, wr, err := r.start(ctx, req)
	if err != nil {
		return Started{}, err
	}
	st := Started{Run: run, Workflow: wr}
	if err := json.Unmarshal(run.Request, &struct {
		Scenarios *[]string
		Agent     **agent.Spec
		Skipped   *[]catalogue.Skipped
	}{&st.Scenarios, &st.Agent, &st.Skipped}); err != nil {
		return Started{}, fmt.Errorf("decode run request: %w", err)
	}
	return st, nil
}

func (r *Runner) start(ctx context.Context, req Request) (benchstore.Run, client.WorkflowRun, error) {
	kind, err := CheckAgent(&req)
	if err != nil {
		return benchstore.Run{}, nil, err
	}
	return kind.start(ctx, r, req)
}

// startBenchmark stores a run of the matrix and starts its Benchmark
// workflow: the scripted agent's (spec nil) or the model-driven one's.
func (r *Runner) startBenchmark(ctx context.Context, req Request, spec *agent.Spec) (benchstore.Run, client.WorkflowRun, error) {
	if err := checkRepeatAndJudge(req); err != nil {
		return benchstore.Run{}, nil, err
	}
	payments, scenarios, err := SelectScenarios(req.Payments, req.Only)
	if err != nil {
		return benchstore.Run{}, nil, err
	}
	scenarios, skipped, err := forAgent(spec, scenarios)
	if err != nil {
		return benchstore.Run{}, nil, err
	}
	conc, err := r.concurrency(req.Concurrency)
	if err != nil {
		return benchstore.Run{}, nil, err
	}
	ids := make([]string, 0, len(scenarios))
	for _, s := range scenarios {
		for range max(req.Repeat, 1) {
			ids = append(ids, s.ID)
		}
	}
	runID := newRunID()
	reqJSON, err := json.Marshal(struct {
		Only        []string            `json:"only"`
		Concurrency int                 `json:"concurrency"`
		Scenarios   []string            `json:"scenarios"`
		Payments    string              `json:"payments"`
		Agent       *agent.Spec         `json:"agent,omitempty"`
		Skipped     []catalogue.Skipped `json:"skipped,omitempty"`
		Repeat      int                 `json:"repeat,omitempty"`
		Judge       string              `json:"judge,omitempty"`
		Sinks       []string            `json:"sinks,omitempty"`
	}{req.Only, conc, ids, payments, spec, skipped, req.Repeat, req.Judge, req.Sinks})
	if err != nil {
		return benchstore.Run{}, nil, fmt.Errorf("encode run request: %w", err)
	}
	summary := fmt.Sprintf("benchmark %s: %d scenarios, %d at a time, payments %s", runID, len(ids), conc, payments)
	return r.launch(ctx, reqJSON, "Benchmark", Benchmark, summary, BenchmarkInput{RunID: runID, ScenarioIDs: ids,
		Concurrency: conc, Payments: inputPayments(payments), Agent: spec, Judge: req.Judge, Sinks: req.Sinks})
}

// concurrency is a run's sliding window: the request's, or the runner's
// default (DefaultScenarioConcurrency when it has none) for 0.
func (r *Runner) concurrency(n int) (int, error) {
	switch {
	case n < 0 || n > MaxConcurrency:
		return 0, &commitlayer.FieldError{Field: "concurrency", Reason: fmt.Sprintf("must be between 1 and %d", MaxConcurrency)}
	case n > 0:
		return n, nil
	case r.DefaultConcurrency > 0:
		return r.DefaultConcurrency, nil
	}
	return DefaultScenarioConcurrency(), nil
}

// launch stores a run and starts its parent workflow (Benchmark or
// Replay) with in, started now; a workflow that cannot start leaves the run
// marked failed, saying why.
func (r *Runner) launch(ctx context.Context, reqJSON []byte, name string, wf any, summary string, in BenchmarkInput) (benchstore.Run, client.WorkflowRun, error) {
	now := time.Now().UTC()
	in.StartedAt = now
	run, err := r.Store.CreateBenchmarkRun(ctx, benchstore.Run{
		ID: in.RunID, Status: "running", Request: reqJSON, StartedAt: now,
	})
	if err != nil {
		return benchstore.Run{}, nil, fmt.Errorf("store run: %w", err)
	}
	tq := r.TaskQueue
	if tq == "" {
		tq = TaskQueue
	}
	opts := client.StartWorkflowOptions{
		ID:                    BenchmarkWorkflowID(in.RunID),
		TaskQueue:             tq,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(SARun.ValueSet(in.RunID)),
		StaticSummary:         summary,
	}
	if r.Pin != (sdkworker.WorkerDeploymentVersion{}) {
		opts.VersioningOverride = &client.PinnedVersioningOverride{Version: r.Pin}
	}
	wr, err := r.Temporal.ExecuteWorkflow(ctx, opts, wf, in)
	if err != nil {
		run.Status, run.LogTail, run.FinishedAt = "failed", "could not start the "+name+" workflow", time.Now().UTC()
		if uerr := r.Store.UpdateBenchmarkRun(ctx, run); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return benchstore.Run{}, nil, fmt.Errorf("start %s workflow: %w", strings.ToLower(name), err)
	}
	return run, wr, nil
}

// forAgent leaves out of a model-driven run (spec not nil) the scenarios
// that script one specific agent behaviour; the scripted agent runs them
// all. Errors are field errors.
func forAgent(spec *agent.Spec, scenarios []catalogue.Scenario) ([]catalogue.Scenario, []catalogue.Skipped, error) {
	if spec == nil {
		return scenarios, nil, nil
	}
	run, skipped := catalogue.SplitForModel(scenarios)
	if len(run) == 0 {
		return nil, nil, &commitlayer.FieldError{Field: "only", Reason: "selects no scenario a model-driven agent runs (the ones it selects script one specific agent behaviour)"}
	}
	return run, skipped, nil
}

// refundProcess is the one business process a Stripe-backed run covers:
// payouts and billing stops stay in the sandbox.
const refundProcess = "refund"

// SelectScenarios checks a run's payments backend name ("" is sandbox) and
// picks its scenarios: every one selected by only on the sandbox; on a
// Stripe backend only the refund scenarios, and an only naming any other
// is refused. Errors are field errors (the API answers 422).
func SelectScenarios(payments string, only []string) (string, []catalogue.Scenario, error) {
	if payments == "" {
		payments = stripepay.NameSandbox
	}
	if !slices.Contains(stripepay.Names, payments) {
		return "", nil, &commitlayer.FieldError{Field: "payments",
			Reason: fmt.Sprintf("%q is not a payments backend; use one of %s", payments, strings.Join(stripepay.Names, ", "))}
	}
	scenarios, err := catalogue.Select(only)
	if err != nil {
		return "", nil, &commitlayer.FieldError{Field: "only", Reason: err.Error()}
	}
	if payments != stripepay.NameSandbox {
		if len(only) > 0 {
			var other []string
			for _, sc := range scenarios {
				if sc.Process != refundProcess {
					other = append(other, sc.ID)
				}
			}
			if len(other) > 0 {
				if len(other) > 3 {
					other = append(other[:3], fmt.Sprintf("and %d more", len(other)-3))
				}
				return "", nil, &commitlayer.FieldError{Field: "only", Reason: fmt.Sprintf(
					"payments %s runs only %s/ scenarios (payouts and billing stops stay in the sandbox); not %s",
					payments, refundProcess, strings.Join(other, ", "))}
			}
		}
		scenarios = slices.DeleteFunc(scenarios, func(sc catalogue.Scenario) bool { return sc.Process != refundProcess })
	}
	if len(scenarios) == 0 {
		return "", nil, &commitlayer.FieldError{Field: "only", Reason: "selects no scenario"}
	}
	return payments, scenarios, nil
}

// inputPayments is the backend name as workflow inputs carry it: empty for
// the sandbox, as in runs recorded before there was a choice.
func inputPayments(name string) string {
	if name == stripepay.NameSandbox {
		return ""
	}
	return name
}

func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Progress asks a running benchmark how far it is.
func (r *Runner) Progress(ctx context.Context, runID string) (Progress, error) {
	val, err := r.Temporal.QueryWorkflow(ctx, BenchmarkWorkflowID(runID), "", QueryProgress)
	if err != nil {
		return Progress{}, fmt.Errorf("query progress of %s: %w", runID, err)
	}
	var p Progress
	if err := val.Get(&p); err != nil {
		return Progress{}, fmt.Errorf("decode progress of %s: %w", runID, err)
	}
	return p, nil
}

// Wait follows a run to its end, calling progress (when not nil) every
// interval with the run's progress, and returns its result.
func (r *Runner) Wait(ctx context.Context, runID string, interval time.Duration, progress func(Progress)) (BenchmarkResult, error) {
	done := make(chan struct{})
	var (
		res BenchmarkResult
		err error
	)
	go func() {
		defer close(done)
		// GetWorkflow follows continue-as-new to the run that completes.
		err = r.Temporal.GetWorkflow(ctx, BenchmarkWorkflowID(runID), "").Get(ctx, &res)
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			if err != nil {
				return res, fmt.Errorf("benchmark %s: %w", runID, err)
			}
			return res, nil
		case <-t.C:
			if progress == nil {
				continue
			}
			if p, perr := r.Progress(ctx, runID); perr == nil {
				progress(p)
			}
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}
