package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/worker"
)

// llmRun is GET /v1/admin/benchmark/{id} of a model-driven run.
type llmRun struct {
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Request json.RawMessage `json:"request"`
	Results []matrix.Row    `json:"results"`
	LogTail string          `json:"log_tail"`
	Raw     json.RawMessage `json:"-"`
}

// startLLMRun posts a model-driven run and waits for its end.
func startLLMRun(t *testing.T, s *stack, body map[string]any) llmRun {
	t.Helper()
	var started struct {
		ID string `json:"id"`
	}
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", body, 202, &started)
	var run llmRun
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var raw json.RawMessage
		s.do(s.adminKey, "GET", "/v1/admin/benchmark/"+started.ID, nil, 200, &raw)
		run = llmRun{} // fresh each poll: decoding into the last one would merge maps
		require.NoError(t, json.Unmarshal(raw, &run))
		run.Raw = raw
		if run.Status != "running" {
			break
		}
		require.True(t, time.Now().Before(deadline), "benchmark still running: %s", run.LogTail)
		time.Sleep(300 * time.Millisecond)
	}
	require.Equal(t, "done", run.Status, run.LogTail)
	return run
}

// TestModelDrivenScenariosThroughAdminAPI runs a few scenarios with the
// model-driven agent on the fake of each provider, through that provider's
// SDK adapter, on the dev server: every row agrees with the oracle on both
// lenses and carries its turns, tokens and tool calls; a scenario that
// scripts one agent behaviour is skipped and listed; a 429 from the
// provider is retried; malformed model output is an agent error on the
// row, not a failed scenario.
func TestModelDrivenScenariosThroughAdminAPI(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	only := []string{"refund/baseline", "refund/lost_response_retry_with_key", "cancel/refund_side_effect",
		"payout/server_error_stop", "refund/no_calls_claims_success"}
	for _, provider := range agent.FakeProviders {
		t.Run(provider, func(t *testing.T) {
			srv, err := s.m.Bench.Harness.Models.Fake(provider, "fake-"+strings.TrimPrefix(provider, agent.FakePrefix))
			require.NoError(t, err)
			srv.Inject(fake.Fault{Status: 429, RetryAfter: time.Second}) // the first turn is rate limited, then answered
			run := startLLMRun(t, s, map[string]any{"agent": "llm", "provider": provider, "only": only, "concurrency": 2})
			var req struct {
				Agent   agent.Spec          `json:"agent"`
				Skipped []catalogue.Skipped `json:"skipped"`
			}
			require.NoError(t, json.Unmarshal(run.Request, &req))
			require.Equal(t, provider, req.Agent.Provider)
			require.Equal(t, []catalogue.Skipped{{ID: "refund/no_calls_claims_success",
				Reason: "scripts an agent that makes no call and reports success"}}, req.Skipped)
			require.Len(t, run.Results, len(only)-1)
			for _, r := range run.Results {
				require.Empty(t, r.Error, r.ID)
				require.True(t, r.Agree.Both(), "%s: truth %s/%s verdict %s/%s", r.ID, r.Truth.Outcome, r.Truth.Policy,
					r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy)
				require.NotNil(t, r.LLM, r.ID)
				require.Equal(t, provider, r.LLM.Provider)
				require.Empty(t, r.LLM.AgentError, r.ID)
				require.Positive(t, r.LLM.InputTokens, r.ID)
				require.NotNil(t, r.Trajectory)
				require.Len(t, r.Trajectory.Turns, r.LLM.Turns)
				require.Equal(t, len(r.Trajectory.Calls), r.AgentCalls)
				for _, c := range r.Trajectory.Calls {
					require.NotEmpty(t, c.CallID, "%s: every call attempt names the model's call", r.ID)
				}
			}
			byID := map[string]matrix.Row{}
			for _, r := range run.Results {
				byID[r.ID] = r
			}
			// The careful agent retried the lost refund with the same key;
			// the injection follower refunded the order nobody asked about.
			keyed := byID["refund/lost_response_retry_with_key"].Trajectory.Calls
			var refunds []llm.Attempt
			for _, c := range keyed {
				if c.Tool == "refund" {
					refunds = append(refunds, c)
				}
			}
			require.Len(t, refunds, 2)
			require.NotEmpty(t, refunds[0].IdempotencyKey)
			require.Equal(t, refunds[0].IdempotencyKey, refunds[1].IdempotencyKey)
			require.Equal(t, commitlayer.StatusFail, byID["cancel/refund_side_effect"].Truth.Policy)
			require.Equal(t, "failure", byID["payout/server_error_stop"].Claim)
			statuses := map[int]int{}
			for _, rq := range s.m.Bench.Harness.Models.FakeRequests(provider) {
				statuses[rq.Status]++
			}
			require.Equal(t, 1, statuses[429], "the rate-limited turn was answered 429 once and then retried")

			// Malformed output on the first turn: the agent stops without a
			// report, the action claims failure, and the row says why.
			srv.Inject(fake.Fault{Malformed: true})
			bad := startLLMRun(t, s, map[string]any{"provider": provider, "only": []string{"deploy/baseline"}})
			require.Len(t, bad.Results, 1)
			r := bad.Results[0]
			require.Empty(t, r.Error)
			require.NotNil(t, r.LLM)
			require.Contains(t, r.LLM.AgentError, "malformed")
			require.Equal(t, "failure", r.Claim)
			require.Zero(t, r.AgentCalls)
			require.True(t, r.Agree.Both(), "truth %s/%s verdict %s/%s", r.Truth.Outcome, r.Truth.Policy,
				r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy)

			if *recordHistories && provider == agent.FakeAnthropic {
				recordHistory(t, s, bench.ScenarioWorkflowID(run.ID, "refund/lost_response_retry_with_key"), "sandbox/bench",
					"scenario_llm_fake-anthropic_refund_lost_response_retry_with_key.json")
			}
		})
	}
}

// TestModelDrivenWorkerStoppedMidConversation stops the worker that runs
// the conversation (the Scenario workflow and its model turns) just after
// it recorded a turn's answer and before Temporal heard of it, and starts
// a new one; a tool call's activity fails the same way after its call was
// made. The scenario finishes: the fakes served one request per turn (no
// turn billed twice), and the refund the failed activity made is not made
// again (no duplicate in the systems of record).
func TestModelDrivenWorkerStoppedMidConversation(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	const provider = agent.FakeOpenAI
	h := s.m.Bench.Harness
	var (
		mu        sync.Mutex
		stopped   bool
		callAgain bool
		second    *harness.Activities
		restarted = make(chan struct{})
	)
	h.AfterStep = func(_ context.Context, kind string, index int) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case kind == "turn" && index == 2 && !stopped:
			stopped = true
			// This worker goes away with the turn's answer recorded and
			// not delivered; a new one takes over the queue.
			go func() {
				s.m.Bench.BenchWorker.Stop()
				h2 := *h
				h2.Models, h2.AfterStep = &harness.Models{}, nil
				opts := s.m.WorkerOptions
				opts.Deployment = s.m.Config.benchmarkDeployment()
				w := worker.NewBare(s.m.Temporal, s.m.Config.Sandbox.TaskQueue, opts)
				bench.Register(w)
				harness.Register(w, &h2)
				if err := w.Start(); err != nil {
					t.Errorf("start the second worker: %v", err)
				}
				mu.Lock()
				second = &h2
				s.m.Bench.BenchWorker = w // Main.Close stops it
				mu.Unlock()
				close(restarted)
			}()
			return errors.New("the worker stopped")
		case kind == "call" && index == 2 && !callAgain:
			callAgain = true // the refund: made, recorded, not delivered
			return errors.New("the worker stopped")
		}
		return nil
	}
	run := startLLMRun(t, s, map[string]any{"provider": provider, "only": []string{"refund/baseline"}})
	<-restarted
	require.Len(t, run.Results, 1)
	r := run.Results[0]
	require.Empty(t, r.Error)
	require.True(t, r.Agree.Both(), "truth %s/%s verdict %s/%s", r.Truth.Outcome, r.Truth.Policy, r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy)
	require.Equal(t, commitlayer.StatusPass, r.Truth.Outcome, "one refund, one status change, one note")
	require.False(t, r.Truth.Duplicate)
	require.True(t, stopped && callAgain)

	served := 0
	for _, m := range []*harness.Models{h.Models, second.Models} {
		for _, rq := range m.FakeRequests(provider) {
			if rq.Status == 200 {
				served++
			}
		}
	}
	require.Greater(t, r.LLM.Turns, 3, "the conversation went on after the stop")
	require.Equal(t, r.LLM.Turns, served, "one request per turn: the recorded turn was not asked again")
	require.NotEmpty(t, second.Models.FakeRequests(provider), "the new worker made the later turns")
	var refunds int
	for _, c := range r.Trajectory.Calls {
		if c.Tool == "refund" {
			refunds++
		}
	}
	require.Equal(t, 1, refunds, "the refund is in the trajectory once")
	require.Equal(t, len(r.Trajectory.Calls), benchstoretest.CountAgentSteps(t, s.m.Bench.Store, run.ID, "refund/baseline", "call"))
}

// TestModelDrivenKeyNeverLeaves runs a real provider's adapter (Anthropic,
// pointed at a fake through ANTHROPIC_BASE_URL) with its key in the
// worker's environment, and searches for the key in the run's request and
// results, the workflows' histories and the write-ahead records.
func TestModelDrivenKeyNeverLeaves(t *testing.T) {
	const key = "sk-ant-api03-KeyThatMustNeverLeaveTheWorker-0123456789abcdef"
	srv, err := fake.Start(llm.Anthropic, agent.ModelPolicy(), fake.Option{Key: key, Model: "claude-haiku-4-5"})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	t.Setenv("ANTHROPIC_API_KEY", key)
	t.Setenv("ANTHROPIC_BASE_URL", srv.BaseURL())
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	run := startLLMRun(t, s, map[string]any{"agent": "llm", "provider": "anthropic", "model": "claude-haiku-4-5",
		"only": []string{"refund/baseline"}})
	require.Len(t, run.Results, 1)
	r := run.Results[0]
	require.Empty(t, r.Error)
	require.NotNil(t, r.LLM)
	require.True(t, r.LLM.CostKnown, "a listed model has a cost")
	require.NotEmpty(t, srv.Requests(), "the adapter reached the fake with the key")

	seen := []string{string(run.Raw)}
	for _, id := range []string{bench.BenchmarkWorkflowID(run.ID), bench.ScenarioWorkflowID(run.ID, "refund/baseline")} {
		it := s.m.Temporal.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			b, err := protojson.Marshal(e)
			require.NoError(t, err)
			seen = append(seen, string(b))
		}
	}
	rows, err := s.m.DB.Pool().Query(context.Background(), `SELECT result::text FROM benchmark.agent_steps WHERE run_id = $1`, run.ID)
	require.NoError(t, err)
	for rows.Next() {
		var txt string
		require.NoError(t, rows.Scan(&txt))
		seen = append(seen, txt)
	}
	require.NoError(t, rows.Err())
	dir := t.TempDir()
	res := report.NewLLMResults(report.NewResults("test", time.Now(), time.Now(), 1, run.Results),
		agent.Spec{Provider: "anthropic", Model: "claude-haiku-4-5"}, nil, nil)
	require.NoError(t, report.WriteLLMFiles(dir, res))
	for _, f := range []string{"llm_anthropic.json", "llm_anthropic.md"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		seen = append(seen, string(b))
	}
	for _, txt := range seen {
		require.NotContains(t, txt, key)
		require.NotContains(t, txt, "KeyThatMustNeverLeave")
	}
}
