// Package bench is the sandbox's benchmark on Temporal: the Benchmark
// workflow fans out one Scenario child per scenario of the failure matrix,
// each running the harness's steps as activities and the product's
// workflows.VerifyAction as its child; Runner starts and follows runs. The product
// never imports it: cmd/commitlayer registers it on a worker (Register)
// only for `demo`, `sandbox` and a worker started with benchmarks enabled.
package bench

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/workflows"
)

// harnessActs is the nil receiver the benchmark workflows call the sandbox
// harness's activities through.
var harnessActs *harness.Activities

// QueryProgress answers a benchmark run's progress.
const QueryProgress = "progress"

// BenchmarkInput starts (or continues) a benchmark run.
type BenchmarkInput struct {
	RunID       string
	ScenarioIDs []string
	// Concurrency bounds the scenarios running at once (the sliding
	// window); zero means 4.
	Concurrency int
	StartedAt   time.Time
	// Next is the index of the first scenario this run still has to start
	// and Rows the rows finished by earlier runs (continue-as-new).
	Next int
	Rows []matrix.Row
	// Payments names the payments backend ("" is the sandbox's own, as in
	// runs recorded before there was a choice); a name, never a key.
	Payments string `json:",omitempty"`
	// Agent is the run's model-driven agent (nil: the scripted agent, as
	// in runs recorded before there was a choice); NotRun are the
	// scenarios its token budget left out so far.
	Agent  *agent.Spec `json:",omitempty"`
	NotRun []string    `json:",omitempty"`
	// ReplayOf is the recorded run a Replay re-executes ("" for a run of
	// the agent); Judge the model judge's provider name ("" for none). A
	// scenario id that comes again in ScenarioIDs is another attempt of it
	// (--repeat).
	ReplayOf string `json:",omitempty"`
	Judge    string `json:",omitempty"`
	// Sinks are the experiment platforms the finished run is logged to
	// (names; the worker reads their keys).
	Sinks []string `json:",omitempty"`
}

// BenchmarkResult is a finished run.
type BenchmarkResult struct {
	RunID      string
	StartedAt  time.Time
	FinishedAt time.Time
	Rows       []matrix.Row
	Summary    matrix.Summary
	// Payments is the run's payments backend name ("" is the sandbox).
	Payments string `json:",omitempty"`
	// Agent and NotRun are as in BenchmarkInput; the not-run scenarios
	// have no row.
	Agent  *agent.Spec `json:",omitempty"`
	NotRun []string    `json:",omitempty"`
}

// Progress is what QueryProgress answers.
type Progress struct {
	Total    int
	Done     int
	Running  []string
	Disagree []string
	Rows     []matrix.Row
}

// scenariosPerRun bounds the children one Benchmark run starts before it
// continues as new, keeping its history small.
const scenariosPerRun = 60

// Benchmark runs the failure matrix: one Scenario child per scenario, at
// most Concurrency at a time, each with a deterministic ID, every result
// read. Rows keep the order of ScenarioIDs. The run's row in the database is
// updated as scenarios finish; a long run continues as new.
func Benchmark(ctx workflow.Context, in BenchmarkInput) (BenchmarkResult, error) {
	if in.RunID == "" || len(in.ScenarioIDs) == 0 {
		return BenchmarkResult{}, temporal.NewNonRetryableApplicationError("run id and scenarios are required", activities.ErrInvalidInput, nil)
	}
	b := newBenchmarkRun(ctx, in)
	if err := b.setup(ctx); err != nil {
		return BenchmarkResult{}, err
	}
	return b.run(ctx)
}

// benchmarkRun is one run of Benchmark: the rows as scenarios finish and
// the sliding window of children in flight.
type benchmarkRun struct {
	in     BenchmarkInput
	window int // children at once
	rows   []matrix.Row
	done   []bool // rows[i] is final (a child's row, an error row, or not run)
	// running marks the children in flight; inFlight counts them.
	running  []bool
	inFlight int
	finished int
	budget   budgetState
	// next is the first scenario not yet started; startedHere counts this
	// run's starts (at most scenariosPerRun before it continues as new).
	next, startedHere int
	sel               workflow.Selector
}

func newBenchmarkRun(ctx workflow.Context, in BenchmarkInput) *benchmarkRun {
	if in.StartedAt.IsZero() {
		in.StartedAt = workflow.Now(ctx)
	}
	n := len(in.ScenarioIDs)
	b := &benchmarkRun{in: in, window: in.Concurrency, rows: make([]matrix.Row, n), done: make([]bool, n),
		running: make([]bool, n), budget: newBudgetState(in), next: in.Next, sel: workflow.NewSelector(ctx)}
	if b.window <= 0 {
		b.window = 4
	}
	for i, r := range in.Rows { // the rows earlier runs finished
		b.rows[i], b.done[i] = r, true
	}
	b.finished = len(in.Rows)
	return b
}

// setup answers the progress query from the run's state.
func (b *benchmarkRun) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) {
		p := Progress{Total: len(b.in.ScenarioIDs), Done: b.finished}
		for i, id := range b.in.ScenarioIDs {
			switch {
			case b.running[i]:
				p.Running = append(p.Running, id)
			case b.done[i]:
				p.Rows = append(p.Rows, b.rows[i])
				if !b.rows[i].Agree.Both() {
					p.Disagree = append(p.Disagree, b.rows[i].ID)
				}
			}
		}
		return p, nil
	})
}

// run keeps the window full until this run's share is started and every
// child it started has finished, recording progress every ten rows; then
// it continues as new, or records the finished run, logs it to its sinks
// and returns it.
func (b *benchmarkRun) run(ctx workflow.Context) (BenchmarkResult, error) {
	for {
		b.fill(ctx)
		if b.inFlight == 0 {
			break // this run's share is started and finished
		}
		b.sel.Select(ctx)
		if b.finished%10 == 0 {
			if _, err := b.record(ctx, "running"); err != nil {
				workflow.GetLogger(ctx).Warn("record progress", "error", err)
			}
		}
	}
	if b.next < len(b.in.ScenarioIDs) {
		cont := b.in
		cont.Next, cont.Rows = b.next, b.rows[:b.next]
		return BenchmarkResult{}, workflow.NewContinueAsNewError(ctx, continueAs(b.in), cont)
	}
	summary, err := b.record(ctx, "done")
	if err != nil {
		return BenchmarkResult{}, fmt.Errorf("record run: %w", err)
	}
	deliverToSinks(ctx, b.in)
	return BenchmarkResult{RunID: b.in.RunID, StartedAt: b.in.StartedAt, FinishedAt: workflow.Now(ctx),
		Rows: b.ranRows(), Summary: summary, Payments: b.in.Payments, Agent: b.in.Agent, NotRun: b.in.NotRun}, nil
}

// fill starts scenarios in order while the window has room and this run
// may start more. A scenario the token budget cannot pay for is listed as
// not run instead.
func (b *benchmarkRun) fill(ctx workflow.Context) {
	for b.next < len(b.in.ScenarioIDs) && b.inFlight < b.window && b.startedHere < scenariosPerRun {
		i := b.next
		b.next++
		switch id := b.in.ScenarioIDs[i]; {
		case b.done[i]:
		case b.budget.spent(b.rows, b.done).Exhausted():
			b.rows[i], b.done[i] = matrix.Row{ID: id, Error: notRunReason}, true
			b.budget.notRun[id] = true
			b.in.NotRun = append(b.in.NotRun, id)
			b.finished++
		default:
			b.start(ctx, i)
		}
	}
}

// start starts scenario i's child and reads its result when it finishes:
// its row, or an error row.
func (b *benchmarkRun) start(ctx workflow.Context, i int) {
	in, id := b.in, b.in.ScenarioIDs[i]
	attempt := attemptOf(in.ScenarioIDs, i)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            ScenarioAttemptWorkflowID(in.RunID, id, attempt),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(SARun.ValueSet(in.RunID), SAScenario.ValueSet(id)),
		StaticSummary:         "scenario " + id,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
	})
	b.running[i], b.inFlight = true, b.inFlight+1
	b.startedHere++
	sin := ScenarioInput{RunID: in.RunID, ScenarioID: id, Payments: in.Payments, ReplayOf: in.ReplayOf, Attempt: attempt, Judge: in.Judge}
	if in.Agent != nil {
		sin.Agent = in.Agent
		// What a scenario starting now may spend (0: no limit).
		sin.TokenBudget = max(b.budget.spent(b.rows, b.done).Remaining(), 0)
	}
	b.sel.AddFuture(workflow.ExecuteChildWorkflow(cctx, Scenario, sin), func(f workflow.Future) {
		var row matrix.Row
		if err := f.Get(ctx, &row); err != nil {
			row = harness.ErrorRow(id, err)
			row.Attempt = attempt
		}
		b.rows[i], b.done[i], b.running[i] = row, true, false
		b.inFlight--
		b.finished++
	})
}

// record stores the run's status and the rows it has so far (those not
// left out by the token budget) and returns their summary.
func (b *benchmarkRun) record(ctx workflow.Context, status string) (matrix.Summary, error) {
	var rows []matrix.Row
	for i := range b.rows {
		if b.done[i] && !b.budget.notRun[b.in.ScenarioIDs[i]] {
			rows = append(rows, b.rows[i])
		}
	}
	rin := harness.RunInput{RunID: b.in.RunID, Status: status, StartedAt: b.in.StartedAt,
		Concurrency: b.window, Rows: rows, Total: len(b.in.ScenarioIDs), Payments: b.in.Payments}
	if status != "running" {
		rin.FinishedAt = workflow.Now(ctx)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var s matrix.Summary
	err := workflow.ExecuteActivity(actx, harnessActs.RecordRun, rin).Get(ctx, &s)
	return s, err
}

// ranRows are the rows of the scenarios that ran: all of them, less those
// the token budget left out.
func (b *benchmarkRun) ranRows() []matrix.Row {
	if len(b.in.NotRun) == 0 {
		return b.rows
	}
	var ran []matrix.Row
	for i, r := range b.rows {
		if !b.budget.notRun[b.in.ScenarioIDs[i]] {
			ran = append(ran, r)
		}
	}
	return ran
}

// ScenarioInput names one scenario of a run.
type ScenarioInput struct {
	RunID      string
	ScenarioID string
	// Payments is the run's payments backend name ("" is the sandbox).
	Payments string `json:",omitempty"`
	// Agent is the run's model-driven agent (nil: the scripted agent);
	// TokenBudget is what this scenario may spend of the run's budget
	// (0: no limit).
	Agent       *agent.Spec `json:",omitempty"`
	TokenBudget int64       `json:",omitempty"`
	// ReplayOf names the recorded run whose calls replace the agent's;
	// Attempt numbers a repeated scenario's runs (0: not repeated); Judge
	// names the model judge's provider ("" for none).
	ReplayOf string `json:",omitempty"`
	Attempt  int    `json:",omitempty"`
	Judge    string `json:",omitempty"`
}

// finalVerdictTimeout bounds the wait for a verification's final verdict.
const finalVerdictTimeout = 5 * time.Minute

// Scenario runs one scenario: a fresh enterprise and tenant; earlier runs by
// the same agent; the agent under chaos; its action recorded through the API
// path; workflows.VerifyAction as a child (its connector pulls go through the
// scenario's extractor chaos); the after-settlement injection and re-check;
// the oracle; a row comparing both lenses.
func Scenario(ctx workflow.Context, in ScenarioInput) (matrix.Row, error) {
	if in.RunID == "" || in.ScenarioID == "" {
		return matrix.Row{}, temporal.NewNonRetryableApplicationError("run and scenario ids are required", activities.ErrInvalidInput, nil)
	}
	sharedCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrInvalidInput}},
	})
	var prep harness.PrepareResult
	if err := workflow.ExecuteActivity(sharedCtx, harnessActs.Prepare, harness.PrepareInput{
		RunID: in.RunID, ScenarioID: in.ScenarioID, Payments: in.Payments, Attempt: in.Attempt,
	}).Get(ctx, &prep); err != nil {
		return matrix.Row{}, fmt.Errorf("prepare: %w", err)
	}
	// Every later step touches the enterprise built by Prepare: run it on
	// that worker's own queue.
	local := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              prep.TaskQueue,
		ScheduleToStartTimeout: time.Minute,
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrInvalidInput, "ScenarioLost"}},
	})
	step := harness.StepInput{RunID: in.RunID, ScenarioID: in.ScenarioID, TenantID: prep.TenantID}
	s := &scenarioRun{in: in, prep: prep, step: step, verdicts: workflow.GetSignalChannel(ctx, SignalVerdictPublished)}
	// Its verifications' watches end with a signal, so they complete.
	// Version 0 (cancelled them when the scenario closed) is retired: no run
	// that took it can reach a worker of a versioned build
	// (docs/operations.md, "Retiring GetVersion branches"); the marker is
	// still recorded.
	workflow.GetVersion(ctx, "end-watch-children", workflow.DefaultVersion, 1)
	row, err := s.run(ctx, local)
	s.endChildWatches(ctx)
	// The enterprise goes away whatever happened.
	dctx, _ := workflow.NewDisconnectedContext(local)
	if cerr := workflow.ExecuteActivity(dctx, harnessActs.Cleanup, step).Get(dctx, nil); cerr != nil {
		workflow.GetLogger(ctx).Warn("cleanup", "error", cerr)
	}
	if err == nil {
		_ = workflow.UpsertTypedSearchAttributes(ctx, SAAgree.ValueSet(agreeWord(row)))
	}
	// Verdicts published after the final one (the after-settlement
	// re-check's) are in the store and the row; consume their signals.
	var v commitlayer.Verdict
	for s.verdicts.ReceiveAsync(&v) {
	}
	return row, err
}

type scenarioRun struct {
	in       ScenarioInput
	prep     harness.PrepareResult
	step     harness.StepInput
	verdicts workflow.ReceiveChannel
	children []workflow.ChildWorkflowFuture
}

// endChildWatches tells the scenario's verifications that nobody watches
// them any more: each completes with its final verdict (and records the end
// of its watch) instead of waiting out 72 hours.
func (s *scenarioRun) endChildWatches(ctx workflow.Context) {
	var sent []workflow.Future
	for _, c := range s.children {
		sent = append(sent, c.SignalChildWorkflow(ctx, workflows.SignalEndWatch, workflows.EndWatch{Reason: "scenario " + s.in.ScenarioID + " done"}))
	}
	for _, f := range sent {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("end watch of a verification", "error", err)
		}
	}
	// Wait for them to complete while this worker (whose queue they run
	// on) is surely alive, but not for ever.
	timeout := workflow.NewTimer(ctx, time.Minute)
	for _, c := range s.children {
		timedOut := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(c, func(workflow.Future) {})
		sel.AddFuture(timeout, func(workflow.Future) { timedOut = true })
		sel.Select(ctx)
		if timedOut {
			workflow.GetLogger(ctx).Warn("verifications did not complete after their watch ended")
			return
		}
	}
}

func agreeWord(r matrix.Row) string {
	if r.Agree.Both() {
		return "agree"
	}
	return "disagree"
}

func (s *scenarioRun) run(ctx, local workflow.Context) (matrix.Row, error) {
	var prior []harness.Recorded
	if err := workflow.ExecuteActivity(local, harnessActs.RunPrior, s.step).Get(ctx, &prior); err != nil {
		return matrix.Row{}, fmt.Errorf("prior runs: %w", err)
	}
	for _, p := range prior {
		if err := s.startVerification(ctx, p); err != nil {
			return matrix.Row{}, err
		}
	}
	agentRes, err := s.runAgent(ctx, local)
	if err != nil {
		return matrix.Row{}, fmt.Errorf("agent: %w", err)
	}
	if err := s.startAgentVerifications(ctx, agentRes); err != nil {
		return matrix.Row{}, err
	}
	actionID := agentRes.Recorded.Action.ID
	if actionID != "" { // "": a via path recorded no action for the task (via.go)
		if err := s.awaitFinal(ctx, actionID); err != nil {
			return matrix.Row{}, err
		}
	}
	// The injection's re-check stores its verdict; Score reads the
	// provisional, final and latest verdicts from the stored history.
	if err := workflow.ExecuteActivity(local, harnessActs.AfterSettlement, harness.RecheckInput{
		RunID: s.in.RunID, ScenarioID: s.in.ScenarioID, TenantID: s.prep.TenantID, ActionID: actionID,
	}).Get(ctx, nil); err != nil {
		return matrix.Row{}, fmt.Errorf("after settlement: %w", err)
	}
	var row matrix.Row
	if err := workflow.ExecuteActivity(local, harness.ScoreActivity, harness.ScoreInput{
		StepInput: s.step, ContractID: s.prep.ContractID, Since: s.prep.Since, ActionID: actionID,
		Claim: agentRes.Claim, Calls: agentRes.Calls,
	}).Get(ctx, &row); err != nil {
		return matrix.Row{}, fmt.Errorf("score: %w", err)
	}
	return s.finishRow(ctx, row)
}

// startVerification starts workflows.VerifyAction for a recorded action as
// a child, on this scenario's worker: the benchmark's wiring of the product's
// verification, whose connector pulls go through the scenario's chaos and
// whose final verdicts are reported to this workflow (Reporter).
func (s *scenarioRun) startVerification(ctx workflow.Context, r harness.Recorded) error {
	a := r.Action
	in := workflows.VerifyActionInput{TenantID: s.prep.TenantID, ActionID: a.ID, SettlesAt: r.SettlesAt, WatchUntil: r.WatchUntil}
	closePolicy := enumspb.PARENT_CLOSE_POLICY_ABANDON // ended by signal, completes on its own
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            workflows.VerifyWorkflowID(s.prep.TenantID, a.ID),
		TaskQueue:             s.prep.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     closePolicy,
		TypedSearchAttributes: workflows.VerifySearchAttributes(s.prep.TenantID, a,
			SARun.ValueSet(s.in.RunID), SAScenario.ValueSet(s.in.ScenarioID)),
		StaticSummary: workflows.VerifySummary(a),
	})
	f := workflow.ExecuteChildWorkflow(cctx, workflows.VerifyAction, in)
	if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return fmt.Errorf("start verification of %s: %w", a.ID, err)
	}
	s.children = append(s.children, f)
	return nil
}

// awaitFinal waits for the verification to publish a final
// (non-provisional) verdict. Published verdicts may arrive in any order;
// the Judge step reads them from the stored history.
func (s *scenarioRun) awaitFinal(ctx workflow.Context, actionID string) error {
	timer := workflow.NewTimer(ctx, finalVerdictTimeout)
	for {
		var v commitlayer.Verdict
		timedOut := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.verdicts, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &v) })
		sel.AddFuture(timer, func(workflow.Future) { timedOut = true })
		sel.Select(ctx)
		if timedOut {
			return fmt.Errorf("no final verdict for %s within %s", actionID, finalVerdictTimeout)
		}
		if v.ActionID == actionID && !v.Provisional {
			return nil
		}
	}
}
