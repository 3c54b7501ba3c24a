package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
	"github.com/commitlayer/commitlayer/sandbox/sinks/sinkstest"
)

// benchRun is a benchmark run as GET /v1/admin/benchmark/{id} shows it.
type benchRun struct {
	ID       string         `json:"id"`
	Status   string         `json:"status"`
	Summary  matrix.Summary `json:"summary"`
	Results  []matrix.Row   `json:"results"`
	Markdown string         `json:"markdown"`
	LogTail  string         `json:"log_tail"`
}

// startAndWait starts a run through the admin API and polls it to its end.
func (s *stack) startAndWait(req map[string]any, timeout time.Duration) benchRun {
	s.t.Helper()
	var started benchRun
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", req, 202, &started)
	var run benchRun
	deadline := time.Now().Add(timeout)
	for {
		// A fresh value each poll: decoding into the last one would merge
		// its rows' maps (call args) with the new rows'.
		run = benchRun{}
		s.do(s.adminKey, "GET", "/v1/admin/benchmark/"+started.ID, nil, 200, &run)
		if run.Status != "running" {
			break
		}
		require.True(s.t, time.Now().Before(deadline), "run still running: %s", run.LogTail)
		time.Sleep(500 * time.Millisecond)
	}
	require.Equal(s.t, "done", run.Status, run.LogTail)
	return run
}

// onePerFamily is the first scenario of each failure family.
func onePerFamily() []string {
	seen := map[string]bool{}
	var ids []string
	for _, sc := range catalogue.Catalogue() {
		if !seen[sc.Family] {
			seen[sc.Family] = true
			ids = append(ids, sc.ID)
		}
	}
	return ids
}

// A run with the model judge (a fake Anthropic speaking its wire format,
// reached through the real adapter with the key from the worker's
// environment) is replayed through the admin API: a Replay parent with one
// Scenario child per recorded row, every recorded call answered as it was
// (0 divergent), every verdict and agreement reproduced, the model judge's
// verdicts carried over without asking the model again, and the key in no
// history.
func TestReplayThroughAdminAPI(t *testing.T) {
	key := "sk-ant-replaytest-" + randHex(12)
	srv, err := fake.Start(llm.Anthropic, fake.RuleJudge{}, fake.Option{Key: key})
	require.NoError(t, err)
	defer srv.Close()
	t.Setenv(llm.KeyEnv[llm.Anthropic], key)
	t.Setenv(llm.BaseURLEnv[llm.Anthropic], srv.BaseURL())
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})

	subset := onePerFamily()
	require.GreaterOrEqual(t, len(subset), 8)
	rec := s.startAndWait(map[string]any{"only": subset, "concurrency": 4, "judge": llm.Anthropic}, 5*time.Minute)
	require.Len(t, rec.Results, len(subset))
	families := map[string]bool{}
	for _, r := range rec.Results {
		families[r.Family] = true
		require.Empty(t, r.Error, r.ID)
		require.True(t, r.Agree.Both(), r.ID)
		require.NotNil(t, r.Trajectory, r.ID)
		require.Len(t, r.Judges, 2, r.ID)
		require.Equal(t, "rule", r.Judges[0].Name)
		require.True(t, strings.HasPrefix(r.Judges[1].Name, "model:anthropic/"), r.Judges[1].Name)
		// The fake model judge judges as the rule judge does.
		require.Equal(t, r.Judges[0].Verdict, r.Judges[1].Verdict, r.ID)
	}
	require.Len(t, families, len(subset), "every failure family")
	// The judge-versus-CommitLayer table has a line per judge.
	require.Contains(t, rec.Markdown, "| rule |")
	require.Contains(t, rec.Markdown, "model:anthropic/")
	asked := len(srv.Requests())
	require.Equal(t, len(subset), asked, "one judge turn per row")

	// Bad replays are refused before anything starts.
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"replay_of": "no-such-run"}, 422, nil)
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"replay_of": rec.ID, "only": []string{"refund/"}}, 400, nil)
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"replay_of": rec.ID, "judge": "anthropic"}, 400, nil)
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"only": subset, "judge": "nosuch"}, 422, nil)
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"only": subset, "repeat": 11}, 400, nil)

	rep := s.startAndWait(map[string]any{"replay_of": rec.ID, "concurrency": 4}, 5*time.Minute)
	require.Len(t, rep.Results, len(rec.Results))
	for i, r := range rep.Results {
		orig := rec.Results[i]
		require.Equal(t, orig.ID, r.ID)
		require.Empty(t, r.Error, r.ID)
		require.NotNil(t, r.Replay, r.ID)
		require.Equal(t, rec.ID, r.Replay.Of)
		require.Zero(t, r.Replay.Divergent, "%s: %v", r.ID, r.Replay.Diffs)
		require.Equal(t, len(orig.Trajectory.Calls), r.Replay.Calls, r.ID)
		require.Equal(t, orig.Verdict.Status, r.Verdict.Status, r.ID)
		require.Equal(t, orig.Verdict.Lenses, r.Verdict.Lenses, r.ID)
		require.True(t, r.SameVerdict(), r.ID)
		require.Equal(t, orig.Truth, r.Truth, r.ID)
		require.Equal(t, orig.Agree, r.Agree, r.ID)
		require.Equal(t, orig.Claim, r.Claim, r.ID)
		require.Equal(t, orig.Judges, r.Judges, "%s: judges carried over", r.ID)
		require.Equal(t, orig.Trajectory, r.Trajectory, r.ID)
	}
	require.Equal(t, asked, len(srv.Requests()), "a replay asks no model")
	require.Contains(t, rep.Markdown, "## Replay of run "+rec.ID)
	require.Contains(t, rep.Markdown, fmt.Sprintf("| Same verdict as recorded | %d/%d |", len(subset), len(subset)))

	// In Temporal: a Replay parent with one Scenario child per row.
	ctx := context.Background()
	parentID := bench.BenchmarkWorkflowID(rep.ID)
	// The run's row says done before the parent's last step (the sinks)
	// and its completion: wait for the workflow itself.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, s.m.Temporal.GetWorkflow(wctx, parentID, "").Get(wctx, nil))
	desc, err := describeWorkflow(ctx, s, parentID, "")
	require.NoError(t, err)
	require.Equal(t, "Replay", desc.WorkflowExecutionInfo.Type.Name)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.WorkflowExecutionInfo.Status)
	for _, id := range subset {
		d, err := describeWorkflow(ctx, s, bench.ScenarioWorkflowID(rep.ID, id), "")
		require.NoError(t, err, id)
		require.Equal(t, "Scenario", d.WorkflowExecutionInfo.Type.Name)
		require.Equal(t, parentID, d.WorkflowExecutionInfo.ParentExecution.GetWorkflowId(), id)
	}

	// The judge's key is in no workflow's history.
	for _, id := range []string{bench.BenchmarkWorkflowID(rec.ID), bench.ScenarioWorkflowID(rec.ID, subset[0]), parentID,
		bench.ScenarioWorkflowID(rep.ID, subset[0])} {
		require.NotContains(t, historyJSON(t, s, id), key, id)
	}

	if *recordHistories {
		recordHistory(t, s, parentID, "sandbox/bench", "replay_subset.json")
		recordHistory(t, s, bench.ScenarioWorkflowID(rep.ID, subset[0]), "sandbox/bench", "replay_scenario_"+sanitizeName(subset[0])+".json")
		recordHistory(t, s, bench.ScenarioWorkflowID(rec.ID, subset[0]), "sandbox/bench", "judge_scenario_"+sanitizeName(subset[0])+".json")
	}
}

// --repeat k runs each scenario k times, each attempt its own workflow on
// its own tenant, and the summary reports pass^k per workflow and overall.
// The run names sinks: the worker logs it to both (fakes speaking their
// REST APIs, keys from its environment) and says so on the log tail.
func TestRepeatThroughAdminAPI(t *testing.T) {
	btKey, lsKey := "bt-repeat-"+randHex(8), "ls-repeat-"+randHex(8)
	bt, ls := sinkstest.NewBraintrust(btKey), sinkstest.NewLangSmith(lsKey)
	defer bt.Close()
	defer ls.Close()
	t.Setenv(sinks.EnvBraintrustKey, btKey)
	t.Setenv(sinks.EnvBraintrustURL, bt.URL)
	t.Setenv(sinks.EnvLangSmithKey, lsKey)
	t.Setenv(sinks.EnvLangSmithURL, ls.URL)
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"only": []string{"refund/"}, "sinks": []string{"nowhere"}}, 422, nil)
	only := []string{"refund/baseline", "refund/lost_response_retry_no_key", "payout/daily_total_exceeded"}
	run := s.startAndWait(map[string]any{"only": only, "concurrency": 4, "repeat": 2, "sinks": []string{"braintrust", "langsmith"}}, 5*time.Minute)
	require.Len(t, run.Results, 6)
	for i, r := range run.Results {
		require.Equal(t, only[i/2], r.ID)
		require.Equal(t, i%2+1, r.Attempt, r.ID)
		require.True(t, r.Agrees(), r.ID)
	}
	ctx := context.Background()
	for _, id := range only {
		a, err := describeWorkflow(ctx, s, bench.ScenarioAttemptWorkflowID(run.ID, id, 1), "")
		require.NoError(t, err)
		b, err := describeWorkflow(ctx, s, bench.ScenarioAttemptWorkflowID(run.ID, id, 2), "")
		require.NoError(t, err)
		require.NotEqual(t, a.WorkflowExecutionInfo.Execution.WorkflowId, b.WorkflowExecutionInfo.Execution.WorkflowId)
	}
	ps := run.Summary.PassK
	require.Len(t, ps, 3, "%+v", ps)
	byName := map[string]matrix.PassK{}
	for _, p := range ps {
		require.Equal(t, 2, p.K)
		byName[p.Process] = p
	}
	// The baseline refund succeeds both times; the retried lost response
	// refunds twice and the payout breaks its limit: the agent's pass^2 is
	// 1 of 3, and CommitLayer says the same, rightly, every time.
	require.Equal(t, "1/2", byName["refund"].Agent.String())
	require.Equal(t, "0/1", byName["payout"].Agent.String())
	require.Equal(t, "1/3", byName[report.PassKAll].Agent.String())
	require.Equal(t, "3/3", byName[report.PassKAll].CommitLayer.String())
	require.Contains(t, run.Markdown, "## pass^2")

	// The sinks step runs after the run is recorded done: wait for its note.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(run.LogTail, "sink langsmith") {
		require.True(t, time.Now().Before(deadline), "no sink report on the log tail: %s", run.LogTail)
		time.Sleep(300 * time.Millisecond)
		s.do(s.adminKey, "GET", "/v1/admin/benchmark/"+run.ID, nil, 200, &run)
	}
	require.Contains(t, run.LogTail, "sink braintrust: 6/6 rows")
	require.NotContains(t, run.LogTail, "did not arrive")
	require.Len(t, bt.Experiments(), 1)
	require.Len(t, bt.Experiments()[0].Events, 6)
	require.Len(t, ls.Runs(), 6)
	for _, id := range []string{bench.BenchmarkWorkflowID(run.ID), bench.ScenarioWorkflowID(run.ID, only[0])} {
		h := historyJSON(t, s, id)
		require.NotContains(t, h, btKey)
		require.NotContains(t, h, lsKey)
	}

	if *recordHistories {
		recordHistory(t, s, bench.BenchmarkWorkflowID(run.ID), "sandbox/bench", "benchmark_repeat.json")
		recordHistory(t, s, bench.ScenarioAttemptWorkflowID(run.ID, only[0], 2), "sandbox/bench", "scenario_attempt_2.json")
	}
}

// historyJSON is a workflow's whole history as text.
func historyJSON(t *testing.T, s *stack, workflowID string) string {
	t.Helper()
	it := s.m.Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var b strings.Builder
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		b.WriteString(e.String())
	}
	return b.String()
}

// describeWorkflow is the server's description of a workflow's latest run.
func describeWorkflow(ctx context.Context, s *stack, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d, err := s.m.Temporal.DescribeWorkflow(ctx, workflowID, runID)
	if err != nil {
		return nil, err
	}
	return d.RawResponse, nil
}

// A model-driven run (the fake OpenAI through its SDK adapter, one
// applicable scenario per failure family) replays faithfully: every
// recorded call re-sent answers as recorded, every verdict, truth and
// agreement is reproduced, the trajectory (with its model turns) is kept,
// and the model is not asked again.
func TestReplayOfModelDrivenRun(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	provider := agent.FakePrefix + llm.OpenAI
	srv, err := s.m.Bench.Harness.Models.Fake(provider, "fake-"+llm.OpenAI)
	require.NoError(t, err)
	var subset []string
	for _, id := range onePerFamily() {
		sc, ok := catalogue.Lookup(id)
		require.True(t, ok, id)
		if reason := catalogue.SkipForModel(sc); reason == "" {
			subset = append(subset, id)
		}
	}
	require.GreaterOrEqual(t, len(subset), 6)
	rec := s.startAndWait(map[string]any{"agent": "llm", "provider": provider, "only": subset, "concurrency": 4}, 5*time.Minute)
	require.Len(t, rec.Results, len(subset))
	for _, r := range rec.Results {
		require.Empty(t, r.Error, r.ID)
		require.True(t, r.Agree.Both(), r.ID)
		require.NotNil(t, r.Trajectory, r.ID)
		require.NotEmpty(t, r.Trajectory.Turns, r.ID)
	}
	asked := len(srv.Requests())
	require.Positive(t, asked)

	rep := s.startAndWait(map[string]any{"replay_of": rec.ID, "concurrency": 4}, 5*time.Minute)
	require.Len(t, rep.Results, len(rec.Results))
	for i, r := range rep.Results {
		orig := rec.Results[i]
		require.Equal(t, orig.ID, r.ID)
		require.Empty(t, r.Error, r.ID)
		require.NotNil(t, r.Replay, r.ID)
		require.Zero(t, r.Replay.Divergent, "%s: %v", r.ID, r.Replay.Diffs)
		require.Equal(t, len(orig.Trajectory.Calls), r.Replay.Calls, r.ID)
		require.Equal(t, orig.Verdict.Lenses, r.Verdict.Lenses, r.ID)
		require.True(t, r.SameVerdict(), r.ID)
		require.Equal(t, orig.Truth, r.Truth, r.ID)
		require.Equal(t, orig.Agree, r.Agree, r.ID)
		require.Equal(t, orig.Claim, r.Claim, r.ID)
		require.Equal(t, orig.Trajectory, r.Trajectory, "%s: the recorded turns and calls are kept", r.ID)
	}
	require.Equal(t, asked, len(srv.Requests()), "a replay asks no model")
}
