// Package sinks logs a benchmark run to evaluation platforms, one experiment
// per run and one record per scenario: the trajectory as the input, the
// oracle's truth as the expected value, CommitLayer's verdict as the output,
// and, as 0/1 scores, whether CommitLayer and each trace-only judge agreed
// with the oracle.
//
// Two sinks speak their platform's REST API over plain net/http (their Go
// SDKs are not served here):
//
//   - Braintrust ([Braintrust]): `Authorization: Bearer <key>`;
//     `GET /v1/project?project_name=…` then `POST /v1/project {name}` when
//     none is found (the create returns an existing project of that name
//     unmodified); `POST /v1/experiment {project_id, name, description,
//     metadata}` (an existing experiment of that name is returned
//     unmodified, so a re-delivered run lands in the same experiment);
//     then batches of `POST /v1/experiment/{id}/insert {events:[…]}`
//     answering `{row_ids:[…]}`. An event carries id, input, expected,
//     output, scores (numbers in [0,1]), metadata and tags; the same id
//     replaces the row, so a retried batch does not duplicate it.
//     Sources: https://www.braintrust.dev/docs/api-reference (base URL,
//     bearer authentication), the OpenAPI document in
//     github.com/braintrustdata/braintrust-openapi openapi/spec.json
//     (postProject, postExperiment, InsertExperimentEventRequest,
//     InsertExperimentEvent, InsertEventsResponse).
//   - LangSmith ([LangSmith]): `x-api-key: <key>` (and `x-tenant-id` for a
//     key linked to several workspaces); the run's experiment is a tracer
//     session, `POST /api/v1/sessions?upsert=true {name, description,
//     start_time, extra}`; each scenario is one root run (run_type chain,
//     trace_id = id, dotted_order = start as `YYYYMMDDTHHMMSS` and 6 digits of microseconds, "Z", the id)
//     sent complete (inputs, outputs, start and end time, session_id) in
//     batches of `POST /api/v1/runs/batch {post:[…], patch:[…]}`; each score
//     is one `POST /api/v1/feedback {id, run_id, trace_id, session_id, key,
//     score, comment}`. Run and feedback ids are UUIDv5 of the run and
//     scenario, so a retried request is idempotent. Sources:
//     https://docs.langchain.com/langsmith/trace-with-api (x-api-key,
//     x-tenant-id), https://docs.langchain.com/langsmith/run-data-format
//     (dotted_order, trace_id), https://docs.langchain.com/langsmith/smith-api
//     (create runs batch, create feedback), the request paths and bodies of
//     github.com/langchain-ai/langsmith-go (run.go RunIngestParam, session.go
//     SessionNewParams, feedback.go FeedbackCreateSchemaParam,
//     baseurl.go: an endpoint ending in /api/v1 is trimmed).
//
// Keys come from BRAINTRUST_API_KEY and LANGSMITH_API_KEY, base URLs from
// BRAINTRUST_API_URL and LANGSMITH_ENDPOINT ([FromEnv]). Requests are
// retried with exponential backoff and jitter on 429, 5xx and network
// errors (Retry-After is honoured up to the backoff cap); nothing else is
// retried. A sink never fails the run: [Sink.Deliver] returns a [Report] of
// what did not arrive and why, bounded in time by its context and the
// sink's own deadline. No key ever appears in a report, an error or a log
// line: each sink redacts its key from whatever text a server sends back.
//
// A run and its rows are sandbox/matrix's types ([matrix.Results],
// [matrix.Row]); a results file decodes into them with [matrix.Decode].
package sinks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// Score keys: CommitLayer's, and each judge's (JudgeScorePrefix + name).
const (
	ScoreCommitLayer = "commitlayer_agrees"
	JudgeScorePrefix = "judge_agrees:"
)

// Scores are a row's 0/1 scores: CommitLayer agrees with the oracle (the
// row ran to the end and both lenses agree) and, per judge, the judge's
// verdict equals the truth of the action as a whole.
func Scores(r matrix.Row) map[string]float64 {
	s := map[string]float64{ScoreCommitLayer: b2f(r.Error == "" && r.Agree.Outcome && r.Agree.Policy)}
	truth := r.Truth.Status()
	for _, j := range r.Judges {
		s[JudgeScorePrefix+j.Name] = b2f(truth != commitlayer.StatusUnknown && j.Verdict == truth)
	}
	return s
}

// rowKey is the row's id within its run (the attempt appended when set).
func rowKey(r matrix.Row) string {
	if r.Attempt > 0 {
		return fmt.Sprintf("%s#%d", r.ID, r.Attempt)
	}
	return r.ID
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Sink logs a run's rows to one platform.
type Sink interface {
	// Name is the sink's name as --sinks spells it.
	Name() string
	// Deliver logs rows as one experiment for run. It does not fail: the
	// report says what did not arrive.
	Deliver(ctx context.Context, run matrix.Results, rows []matrix.Row) Report
}

// Report is what a sink delivered.
type Report struct {
	Sink string `json:"sink"`
	// Rows given and delivered.
	Rows      int `json:"rows"`
	Delivered int `json:"delivered"`
	// Scores sent apart from the rows (LangSmith feedback) and delivered;
	// 0 for a sink whose scores ride on its rows.
	Scores          int `json:"scores,omitempty"`
	ScoresDelivered int `json:"scores_delivered,omitempty"`
	// Experiment is the platform's id of the run's experiment, once known.
	Experiment string `json:"experiment,omitempty"`
	// Reasons are the distinct reasons something did not arrive.
	Reasons []string `json:"reasons,omitempty"`
}

// Missing counts rows and scores that did not arrive.
func (r Report) Missing() int { return r.Rows - r.Delivered + r.Scores - r.ScoresDelivered }

// OK is true when everything arrived.
func (r Report) OK() bool { return r.Missing() == 0 }

func (r Report) String() string {
	s := fmt.Sprintf("%s: %d/%d rows", r.Sink, r.Delivered, r.Rows)
	if r.Scores > 0 {
		s += fmt.Sprintf(", %d/%d scores", r.ScoresDelivered, r.Scores)
	}
	if len(r.Reasons) > 0 {
		s += " (" + strings.Join(r.Reasons, "; ") + ")"
	}
	return s
}

func (r *Report) reason(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	if !slices.Contains(r.Reasons, msg) {
		r.Reasons = append(r.Reasons, msg)
	}
}

// DeliverAll delivers to every sink at once and returns their reports in
// the order of sinks.
func DeliverAll(ctx context.Context, sinks []Sink, run matrix.Results, rows []matrix.Row) []Report {
	reports := make([]Report, len(sinks))
	var wg sync.WaitGroup
	for i, s := range sinks {
		wg.Go(func() { reports[i] = s.Deliver(ctx, run, rows) })
	}
	wg.Wait()
	return reports
}

// experimentName names a run's experiment on every platform.
func experimentName(run matrix.Results) string {
	if run.ID != "" {
		return "commitlayer " + run.ID
	}
	commit := run.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return fmt.Sprintf("commitlayer %s %s", commit, run.StartedAt.UTC().Format(time.RFC3339))
}

// runMetadata is the run's metadata on every platform.
func runMetadata(run matrix.Results) map[string]any {
	m := map[string]any{"commit": run.Commit, "started_at": run.StartedAt.UTC().Format(time.RFC3339Nano)}
	for k, v := range map[string]string{"run_id": run.ID, "payments": run.PaymentsBackend,
		"provider": modelOf(run).Provider, "model": modelOf(run).Model} {
		if v != "" {
			m[k] = v
		}
	}
	if len(run.Figures) > 0 {
		m["figures"] = run.Figures
	}
	return m
}

// rowMetadata is a row's metadata on every platform.
func rowMetadata(run matrix.Results, r matrix.Row) map[string]any {
	m := map[string]any{
		"scenario": r.ID, "workflow": r.Process, "injection": r.Injection, "family": r.Family,
		"latency_ms": r.LatencyMS, "judges": judgesOrEmpty(r.Judges), "commit": run.Commit,
	}
	for k, v := range map[string]string{"run_id": run.ID, "payments": run.PaymentsBackend,
		"provider": modelOf(run).Provider, "model": modelOf(run).Model, "error": r.Error,
		"temporal_workflow_id": r.WorkflowID, "temporal_run_id": r.RunID} {
		if v != "" {
			m[k] = v
		}
	}
	if r.Attempt > 0 {
		m["attempt"] = r.Attempt
	}
	return m
}

func judgesOrEmpty(js []matrix.JudgeVerdict) []matrix.JudgeVerdict {
	if js == nil {
		return []matrix.JudgeVerdict{}
	}
	return js
}

// input is a row's input: the scenario and its trajectory (null when none
// was recorded).
func input(r matrix.Row) map[string]any {
	return map[string]any{"scenario": r.ID, "trajectory": r.Trajectory}
}

// expected is a row's expected value: the oracle's truth.
func expected(r matrix.Row) map[string]any {
	return map[string]any{"status": r.Truth.Status(), "outcome": r.Truth.Outcome, "policy": r.Truth.Policy,
		"knowable": r.Truth.Knowable}
}

// output is a row's output: CommitLayer's verdict.
func output(r matrix.Row) map[string]any {
	fs := r.Verdict.Findings
	if fs == nil {
		fs = []commitlayer.Finding{}
	}
	return map[string]any{"status": r.Verdict.Status, "provisional_status": r.Verdict.ProvisionalStatus,
		"lenses": r.Verdict.Lenses, "findings": fs}
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// modelOf is a model-driven run's provider and model (its first row's
// that names one); empty for a scripted run.
func modelOf(run matrix.Results) matrix.RowLLM {
	for _, r := range run.Scenarios {
		if r.LLM != nil {
			return *r.LLM
		}
	}
	return matrix.RowLLM{}
}
