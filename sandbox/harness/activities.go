package harness

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// Store is what the harness needs from the database.
type Store interface {
	CreateBenchmarkTenant(ctx context.Context, runID, scenarioID string) (commitlayer.Tenant, string, error)
	DeleteTenant(ctx context.Context, tenantID string) error
	PutContract(ctx context.Context, tenantID, contractID string, source []byte) (commitlayer.ContractRecord, bool, error)
	CreateConnector(ctx context.Context, tenantID string, c commitlayer.Connector) (commitlayer.Connector, error)
	VerdictHistory(ctx context.Context, tenantID, actionID string) ([]commitlayer.Verdict, error)
	GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error)
	GetBenchmarkRun(ctx context.Context, id string) (benchstore.Run, error)
	UpdateBenchmarkRun(ctx context.Context, r benchstore.Run) error
	VerificationStarted(ctx context.Context, tenantID, actionID string) error
	PassLatency(ctx context.Context, tenantID, actionID string, version int) (time.Duration, error)
}

// Recorder records actions and lists orphans: service.Actions, the path
// POST /v1/actions and GET /v1/actions/orphans take, so the harness records
// the agent's action exactly as the API does.
type Recorder interface {
	Record(ctx context.Context, tenantID string, a commitlayer.Action, idempotencyKey string, requestHash []byte) (commitlayer.ActionRecord, bool, error)
	Orphans(ctx context.Context, tenantID, contractID string, since, until time.Time) ([]contracts.Orphan, error)
}

// Rechecker forces a re-verification (the recheck update).
type Rechecker interface {
	Recheck(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error)
}

// ContractsFS holds the eight sandbox contracts (sandbox/contracts).
type ContractsFS interface {
	ReadFile(name string) ([]byte, error)
}

// Activities runs the steps of the failure matrix. Steps bound to one
// scenario's enterprise run in the process that built it: Prepare answers
// the process's own task queue and every later step is scheduled there.
type Activities struct {
	Store     Store
	Recorder  Recorder
	Rechecker Rechecker
	// Contracts reads "<contract id>.yaml".
	Contracts ContractsFS
	// Dir holds the enterprises' files, one directory per scenario.
	Dir string
	// TaskQueue is this process's own task queue.
	TaskQueue string
	Logger    *slog.Logger
	// Host holds this process's live enterprises; it must be set.
	Host *Host
	// Getenv reads the payments backend's settings (STRIPE_TEST_SECRET_KEY,
	// STRIPE_API_BASE) in this process; nil means os.Getenv. Workflow inputs
	// carry the backend's name only.
	Getenv func(string) string
	// QueryConnectors names the systems a scenario's tenant reads with the
	// http_json query connector instead of their feed (EnvQueryConnectors).
	QueryConnectors []string
	// Models and AgentSteps serve model-driven agents (llmagent.go): the
	// providers built in this process, the write-ahead record of turns and
	// tool calls. AfterStep, when set, runs after a turn or call is
	// recorded (tests stop a worker there).
	Models     *Models
	AgentSteps AgentSteps
	AfterStep  func(ctx context.Context, kind string, index int) error
	// JudgeProviders builds the model judge's provider (--judge); nil
	// reads its key from this process's environment (llm.FromEnv).
	JudgeProviders JudgeProviders
	// API is the base URL of the CommitLayer API that a model-driven
	// agent's actions are recorded through on the via paths (the MCP
	// gateway posts them, the OTLP export sends its spans there); Actions
	// lists what was recorded (via_run.go). Empty: no via runs here.
	API     string
	Actions ActionLister
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// PrepareInput names the scenario to prepare.
type PrepareInput struct {
	RunID      string
	ScenarioID string
	// Payments names the payments backend ("" is the sandbox); the key, if
	// any, is read in this process.
	Payments string `json:",omitempty"`
	// Attempt numbers a repeated scenario's runs (0 or 1: the first).
	Attempt int `json:",omitempty"`
}

// PrepareResult is where the scenario lives.
type PrepareResult struct {
	TaskQueue  string
	TenantID   string
	ContractID string
	// Since is when the enterprise's clock started, after its seed (for
	// orphans: the seed's records are not effects of anyone's action).
	Since time.Time
}

// Prepare builds the scenario's fresh enterprise and fresh tenant: the
// workflow's contract, one http_events connector per system pointing at
// the enterprise (http_json for the systems in QueryConnectors), the
// chaos armed for the connectors.
func (a *Activities) Prepare(ctx context.Context, in PrepareInput) (PrepareResult, error) {
	sc, ok := catalogue.Lookup(in.ScenarioID)
	if !ok {
		return PrepareResult{}, invalidInput("unknown scenario "+in.ScenarioID, nil)
	}
	wf, ok := business.Lookup(sc.Process)
	if !ok {
		return PrepareResult{}, invalidInput("unknown workflow "+sc.Process, nil)
	}
	src, err := a.Contracts.ReadFile(wf.Contract + ".yaml")
	if err != nil {
		return PrepareResult{}, invalidInput("read contract "+wf.Contract, err)
	}
	// A retry of this activity in this process (its first attempt timed
	// out after finishing) answers what the first attempt built. A retry in
	// another process builds afresh; the first attempt's tenant goes with
	// the run's purge.
	key := in.RunID + "/" + in.ScenarioID
	if in.Attempt > 1 {
		key += fmt.Sprintf("#%d", in.Attempt)
	}
	a.Host.mu.Lock()
	if prep, ok := a.Host.prepared[key]; ok {
		a.Host.mu.Unlock()
		return prep, nil
	}
	a.Host.mu.Unlock()
	getenv := a.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	pay, err := a.Host.Payments(in.Payments, getenv, a.logger())
	if err != nil {
		// A bad name or a missing or malformed key: no retry mends it.
		return PrepareResult{}, invalidInput(err.Error(), nil)
	}
	tenant, tenantKey, err := a.Store.CreateBenchmarkTenant(ctx, in.RunID, in.ScenarioID)
	if err != nil {
		return PrepareResult{}, fmt.Errorf("create tenant: %w", err)
	}
	dir := filepath.Join(a.Dir, in.RunID, sanitize(in.ScenarioID)+"-"+tenant.ID)
	l, err := StartWith(ctx, dir, sc, StartOptions{Payments: pay.Payments})
	if err != nil {
		_ = a.Store.DeleteTenant(ctx, tenant.ID)
		return PrepareResult{}, fmt.Errorf("start enterprise: %w", err)
	}
	fail := func(err error) (PrepareResult, error) {
		_ = l.Close()
		_ = os.RemoveAll(dir)
		_ = a.Store.DeleteTenant(ctx, tenant.ID)
		return PrepareResult{}, err
	}
	if _, _, err := a.Store.PutContract(ctx, tenant.ID, wf.Contract, src); err != nil {
		return fail(fmt.Errorf("put contract: %w", err))
	}
	for _, sys := range systems.Names {
		c, err := connectorFor(l.Env.Enterprise.URL(), sys, a.QueryConnectors)
		if err != nil {
			return fail(fmt.Errorf("connector %s: %w", sys, err))
		}
		if _, err := a.Store.CreateConnector(ctx, tenant.ID, c); err != nil {
			return fail(fmt.Errorf("create connector %s: %w", sys, err))
		}
	}
	prep := PrepareResult{TaskQueue: a.TaskQueue, TenantID: tenant.ID, ContractID: wf.Contract,
		Since: l.Env.Enterprise.Clock().Start()}
	a.Host.mu.Lock()
	if a.Host.live == nil {
		a.Host.live = map[string]*live{}
		a.Host.prepared = map[string]PrepareResult{}
	}
	var wfID string
	if activity.IsActivity(ctx) {
		wfID = activity.GetInfo(ctx).WorkflowExecution.ID
	}
	a.Host.live[tenant.ID] = &live{Live: l, tenantID: tenant.ID, dir: dir, started: time.Now(), key: key, workflowID: wfID,
		tenantKey: tenantKey}
	a.Host.prepared[key] = prep
	a.Host.mu.Unlock()
	return prep, nil
}

func sanitize(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// StepInput names a prepared scenario.
type StepInput struct {
	RunID      string
	ScenarioID string
	TenantID   string
}

// Recorded is an action recorded through the API path, with what its
// verification needs.
type Recorded struct {
	Action     commitlayer.Action
	SettlesAt  time.Time
	WatchUntil time.Time
}

// RunPrior runs the scenario's earlier tasks by the same agent and records
// their actions.
func (a *Activities) RunPrior(ctx context.Context, in StepInput) ([]Recorded, error) {
	l, err := a.get(in.TenantID)
	if err != nil {
		return nil, err
	}
	results, err := l.RunPrior(ctx)
	if err != nil {
		return nil, fmt.Errorf("prior runs: %w", err)
	}
	out := make([]Recorded, 0, len(results))
	for i, r := range results {
		rec, err := a.record(ctx, in, r.Action, fmt.Sprintf("prior-%d", i))
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// AgentResult is the main task's recorded action and what the agent did.
type AgentResult struct {
	Recorded Recorded
	Claim    string
	Calls    int
	// Also are the other actions a via path recorded for the agent's calls
	// (another subject, another contract); Recorded is then the task's
	// action, zero when no call recorded one (via_run.go).
	Also []Recorded `json:",omitempty"`
}

// RunAgent runs the scenario's task under the agent's chaos and records the
// action the agent reports.
func (a *Activities) RunAgent(ctx context.Context, in StepInput) (AgentResult, error) {
	l, err := a.get(in.TenantID)
	if err != nil {
		return AgentResult{}, err
	}
	res, err := l.RunAgent(ctx)
	if err != nil {
		return AgentResult{}, fmt.Errorf("agent: %w", err)
	}
	rec, err := a.record(ctx, in, res.Action, "main")
	if err != nil {
		return AgentResult{}, err
	}
	return AgentResult{Recorded: rec, Claim: res.Action.Claim.Status, Calls: len(res.Trajectory.Calls)}, nil
}

// record stores an action through the API path with an idempotency key
// derived from the run, the scenario and the step, so a retried activity
// records it once.
func (a *Activities) record(ctx context.Context, in StepInput, act commitlayer.Action, step string) (Recorded, error) {
	key := fmt.Sprintf("benchmark/%s/%s/%s", in.RunID, in.ScenarioID, step)
	act.ID = "" // the store names it
	hash := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%s|%v|%s", act.Contract, act.Agent, act.Subject,
		act.RequestedAt.UTC().Format(time.RFC3339Nano), act.Params, act.Claim.Status)))
	rec, _, err := a.Recorder.Record(ctx, in.TenantID, act, key, hash[:])
	if err != nil {
		return Recorded{}, fmt.Errorf("record %s action: %w", step, err)
	}
	// The Scenario starts this verification as its child: keep the
	// reconciler from starting it first.
	if err := a.Store.VerificationStarted(ctx, in.TenantID, rec.ID); err != nil {
		return Recorded{}, fmt.Errorf("record %s action: %w", step, err)
	}
	return Recorded{Action: rec.Action, SettlesAt: rec.SettlesAt, WatchUntil: rec.WatchUntil}, nil
}

// AfterSettlement runs the scenario's after-settlement injection, if it has
// one, and then forces a re-check of the action.
func (a *Activities) AfterSettlement(ctx context.Context, in RecheckInput) (*commitlayer.Verdict, error) {
	l, err := a.get(in.TenantID)
	if err != nil {
		return nil, err
	}
	did, err := l.AfterSettlement(ctx)
	if err != nil {
		return nil, fmt.Errorf("after-settlement injection: %w", err)
	}
	if !did || in.ActionID == "" { // no injection, or no action to re-check (a via path recorded none)
		return nil, nil
	}
	v, err := a.Rechecker.Recheck(ctx, in.TenantID, in.ActionID)
	if err != nil {
		return nil, fmt.Errorf("recheck after injection: %w", err)
	}
	return &v, nil
}

// RecheckInput names an action to re-check.
type RecheckInput struct {
	RunID      string
	ScenarioID string
	TenantID   string
	ActionID   string
}

// ScoreInput is what a row is built from besides the oracle and the
// stored verdicts.
type ScoreInput struct {
	StepInput
	ContractID string
	Since      time.Time
	ActionID   string
	Claim      string
	Calls      int
}

// Score reads the truth from the enterprise's files (the oracle), lists the
// orphans CommitLayer reports for the tenant, and builds the row: the
// verdict scored against the truth. Registered as ScoreActivity.
func (a *Activities) Score(ctx context.Context, in ScoreInput) (matrix.Row, error) {
	l, err := a.get(in.TenantID)
	if err != nil {
		return matrix.Row{}, err
	}
	truth, stray, err := l.Truth(ctx)
	if err != nil {
		return matrix.Row{}, fmt.Errorf("oracle: %w", err)
	}
	orphans, err := a.Recorder.Orphans(ctx, in.TenantID, in.ContractID, in.Since, time.Now())
	if err != nil {
		return matrix.Row{}, fmt.Errorf("orphans: %w", err)
	}
	seen := map[commitlayer.Subject]bool{}
	var subjects []commitlayer.Subject
	for _, o := range orphans {
		if !seen[o.Fact.Subject] {
			seen[o.Fact.Subject] = true
			subjects = append(subjects, o.Fact.Subject)
		}
	}
	sort.Slice(subjects, func(i, j int) bool { return subjects[i] < subjects[j] })
	if in.ActionID == "" {
		// A via path recorded no action for the task (via_run.go).
		if !l.viaOn() {
			return matrix.Row{}, errNoActionID
		}
		row := report.BuildRow(l.Scenario, truth, stray, noActionVerdict, noActionVerdict, 0, subjects,
			in.Claim, in.Calls, 0, l.ChaosLog())
		a.amendRow(l, &row)
		return row, nil
	}
	// The stored history is the authority on which verdict came first and
	// which is the last; signals may arrive in any order.
	history, err := a.Store.VerdictHistory(ctx, in.TenantID, in.ActionID)
	if err != nil {
		return matrix.Row{}, fmt.Errorf("verdict history: %w", err)
	}
	var final *commitlayer.Verdict
	for i := range history {
		if !history[i].Provisional {
			final = &history[i]
			break
		}
	}
	if final == nil {
		return matrix.Row{}, fmt.Errorf("action %s has no final verdict stored", in.ActionID)
	}
	// Verify latency: from the action's row being written to the
	// evaluation of its first final verdict, both on the store's clock.
	rec, err := a.Store.GetAction(ctx, in.TenantID, in.ActionID)
	if err != nil {
		return matrix.Row{}, fmt.Errorf("load action: %w", err)
	}
	latency := float64(final.EvaluatedAt.Sub(rec.CreatedAt)) / float64(time.Millisecond)
	row := report.BuildRow(l.Scenario, truth, stray, history[0], history[len(history)-1], len(history), subjects,
		in.Claim, in.Calls, latency, l.ChaosLog())
	pass, err := a.Store.PassLatency(ctx, in.TenantID, in.ActionID, final.Version)
	if err != nil {
		return matrix.Row{}, err
	}
	row.PassLatencyMS = float64(pass) / float64(time.Millisecond)
	a.amendRow(l, &row)
	return row, nil
}

// amendRow adds what the agent did to a judged row: the trajectory, the
// rule judge, the refusals, the model-driven agent's figures, the via path
// and a replay's comparison.
func (a *Activities) amendRow(l *live, row *matrix.Row) {
	tr := l.Env.Result.Trajectory
	row.Trajectory = &tr
	row.Judges = []matrix.JudgeVerdict{ruleJudge(tr)}
	row.Refused = report.Refusals(l.Env.Result.Trajectory.Calls)
	llmRow(l, row)
	viaRow(l, row)
	if st := l.replay(); st != nil {
		st.amend(row)
	}
}

// Cleanup closes the scenario's enterprise and removes its files. The
// tenant's rows stay until the run is purged.
func (a *Activities) Cleanup(ctx context.Context, in StepInput) error {
	a.Host.mu.Lock()
	l, ok := a.Host.live[in.TenantID]
	delete(a.Host.live, in.TenantID)
	if ok {
		delete(a.Host.prepared, l.key)
	}
	a.Host.mu.Unlock()
	if !ok {
		return nil // already cleaned up (a retried activity)
	}
	l.closeVia()
	err := l.Close()
	if rerr := os.RemoveAll(l.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		a.logger().Warn("cleanup scenario", "scenario", in.ScenarioID, "error", err)
	}
	return nil
}

// RunInput describes a benchmark run's bookkeeping.
type RunInput struct {
	RunID       string
	Status      string // running, done, failed
	StartedAt   time.Time
	FinishedAt  time.Time
	Concurrency int
	Rows        []matrix.Row
	Total       int
	// Payments is the run's payments backend name ("" is the sandbox).
	Payments string `json:",omitempty"`
}

// RecordRun stores a run's progress or result on its benchmark run row:
// status, summary, rows, markdown and log tail. It returns the summary.
func (a *Activities) RecordRun(ctx context.Context, in RunInput) (matrix.Summary, error) {
	res := report.NewResults("", in.StartedAt, in.FinishedAt, in.Concurrency, in.Rows)
	report.SetPayments(&res, in.Payments)
	run, err := a.Store.GetBenchmarkRun(ctx, in.RunID)
	if errors.Is(err, commitlayer.ErrNotFound) {
		return res.Summary, nil // a run started without a stored row keeps no bookkeeping
	} else if err != nil {
		return matrix.Summary{}, fmt.Errorf("load run %s: %w", in.RunID, err)
	}
	summary, err := json.Marshal(res.Summary)
	if err != nil {
		return matrix.Summary{}, fmt.Errorf("encode summary: %w", err)
	}
	rows, err := json.Marshal(res.Scenarios)
	if err != nil {
		return matrix.Summary{}, fmt.Errorf("encode rows: %w", err)
	}
	run.Status, run.Summary, run.Results, run.Markdown = in.Status, summary, rows, report.Markdown(res)
	run.LogTail = logTail(in)
	if !in.FinishedAt.IsZero() {
		run.FinishedAt = in.FinishedAt
	}
	if err := a.Store.UpdateBenchmarkRun(ctx, run); err != nil {
		return matrix.Summary{}, fmt.Errorf("update run %s: %w", in.RunID, err)
	}
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Info("benchmark progress", "run", in.RunID, "done", len(in.Rows), "total", in.Total)
	}
	return res.Summary, nil
}

// logTail is the last lines of a run's log: one per finished scenario.
func logTail(in RunInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d/%d scenarios done\n", in.Status, len(in.Rows), in.Total)
	rows := in.Rows
	if len(rows) > 40 {
		rows = rows[len(rows)-40:]
	}
	for _, r := range rows {
		word := "agree"
		if !r.Agree.Both() {
			word = "DISAGREE"
		}
		fmt.Fprintf(&b, "%-45s %-8s truth %s/%s verdict %s/%s %.0fms %s\n", r.ID, word, r.Truth.Outcome, r.Truth.Policy,
			r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy, r.LatencyMS, r.Error)
	}
	return b.String()
}

// ErrorRow is the row of a scenario that could not run to the end: it
// counts as a disagreement on both lenses.
func ErrorRow(id string, err error) matrix.Row {
	r := matrix.Row{ID: id, Error: err.Error()}
	if sc, ok := catalogue.Lookup(id); ok {
		r.Process, r.Injection, r.Family, r.Summary = sc.Process, sc.Injection, sc.Family, sc.Summary
	}
	return r
}

// invalidInput is an activity error no retry can fix, typed as the
// product's activities are (activities.ErrInvalidInput).
func invalidInput(msg string, cause error) error {
	return temporal.NewNonRetryableApplicationError(msg, activities.ErrInvalidInput, cause)
}

// ScoreActivity is the registered name of Activities.Score: "Judge", the
// name recorded histories carry (the row builder was called the judge
// before "judge" came to mean only the trace-only judges).
const ScoreActivity = "Judge"

// activityRegistry is a worker's or a test environment's activity
// registration.
type activityRegistry interface {
	RegisterActivity(a any)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the harness's activities on r under their recorded
// names: each method by its name, and Score as ScoreActivity.
func Register(r activityRegistry, a *Activities) {
	r.RegisterActivity(a)
	r.RegisterActivityWithOptions(a.Score, activity.RegisterOptions{Name: ScoreActivity})
}
