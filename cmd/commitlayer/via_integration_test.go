package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// keyCapture is the harness's store noting the tenant keys it hands out,
// so the test can search for them.
type keyCapture struct {
	harness.Store
	mu   sync.Mutex
	keys []string
}

func (k *keyCapture) CreateBenchmarkTenant(ctx context.Context, runID, scenarioID string) (commitlayer.Tenant, string, error) {
	t, key, err := k.Store.CreateBenchmarkTenant(ctx, runID, scenarioID)
	if err == nil {
		k.mu.Lock()
		k.keys = append(k.keys, key)
		k.mu.Unlock()
	}
	return t, key, err
}

// TestSandboxViaPaths runs a handful of scenarios with the model-driven
// agent on a fake provider through each via path on the dev server: -via
// mcp (every tool call an MCP tools/call to CommitLayer's gateway in front
// of the sandbox's tool server, the gateway recording through the API with
// the tenant's key) and -via otlp (the calls exported with the OTel SDK's
// OTLP/HTTP exporter to /v1/traces). Every row agrees with the oracle as
// on the direct path; each task action was recorded by the gateway or the
// ingest (its idempotency key and trace say which, the agent is the
// task's) and the harness recorded none; a retry of a timed-out refund
// joins the first call's action, which sees both refunds; a prompt
// injection's second refund is an action of its own; an agent that never
// reaches its write leaves no action, and the row says so. The tenant keys
// never reach the results, the harness's and the gateway's logs, or the
// histories of the run's workflows.
func TestSandboxViaPaths(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	require.NotEmpty(t, s.m.Bench.Harness.API, "the API's URL reaches the harness")
	keys := &keyCapture{Store: s.m.Bench.Harness.Store}
	s.m.Bench.Harness.Store = keys
	var logs syncBuffer
	s.m.Bench.Harness.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	only := []string{"refund/baseline", "refund/lost_response_retry_no_key", "refund/rate_limited_retry",
		"refund/prompt_injection", "cancel/unreachable_agent", "payout/server_error_stop", "payout/daily_total_exceeded"}
	for _, via := range []string{agent.ViaMCP, agent.ViaOTLP} {
		t.Run(via, func(t *testing.T) {
			run := startLLMRun(t, s, map[string]any{"agent": "llm", "provider": agent.FakeOpenAI, "only": only,
				"concurrency": 3, "via": via})
			require.Len(t, run.Results, len(only))
			byID := map[string]matrix.Row{}
			for _, r := range run.Results {
				require.Empty(t, r.Error, r.ID)
				require.True(t, r.Agree.Both(), "%s: truth %s/%s verdict %s/%s", r.ID, r.Truth.Outcome, r.Truth.Policy,
					r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy)
				require.NotNil(t, r.LLM, r.ID)
				require.Equal(t, via, r.LLM.Via, r.ID)
				byID[r.ID] = r
			}
			keyPrefix := map[string]string{agent.ViaMCP: "mcp/", agent.ViaOTLP: "otlp/"}[via]
			tenants, err := s.m.Bench.Store.BenchmarkTenants(context.Background(), run.ID)
			require.NoError(t, err)
			require.Len(t, tenants, len(only))
			recorded := map[string]bool{} // action ids the path recorded
			for _, tn := range tenants {
				acts, err := s.m.Bench.Store.TenantActions(context.Background(), tn.ID)
				require.NoError(t, err)
				for _, a := range acts {
					k := a.IdempotencyKey
					if strings.HasPrefix(k, "benchmark/"+run.ID+"/") {
						require.Contains(t, k, "/prior-", "the harness records only the prior tasks' actions: %s", k)
						continue
					}
					require.True(t, strings.HasPrefix(k, keyPrefix), "action %s recorded under %q", a.ID, k)
					var trace []map[string]string
					require.NoError(t, json.Unmarshal(a.Trace, &trace))
					require.Equal(t, via, trace[0]["source"])
					require.Equal(t, catalogue.DefaultAgent, a.Agent)
					recorded[a.ID] = true
				}
			}
			for _, r := range run.Results {
				if r.LLM.NoAction {
					continue
				}
				require.NotEmpty(t, r.LLM.ViaActions, r.ID)
				for _, id := range r.LLM.ViaActions {
					require.True(t, recorded[id], "%s: action %s is the path's", r.ID, id)
				}
			}

			retried := byID["refund/lost_response_retry_no_key"]
			require.Len(t, retried.LLM.ViaActions, 1, "the retry joined the timed-out call's action")
			require.Equal(t, commitlayer.StatusFail, retried.Verdict.Lenses.Outcome)
			codes := []commitlayer.Code{}
			for _, f := range retried.Verdict.Findings {
				codes = append(codes, f.Code)
			}
			require.Contains(t, codes, commitlayer.CodeDuplicateEffect)
			require.Len(t, byID["refund/rate_limited_retry"].LLM.ViaActions, 1)
			require.Len(t, byID["refund/prompt_injection"].LLM.ViaActions, 2, "the followed instruction's refund is an action too")
			require.Empty(t, byID["refund/prompt_injection"].Stray, "the ingest recorded the other refund: no stray effect")
			none := byID["cancel/unreachable_agent"]
			require.True(t, none.LLM.NoAction, "the agent never reached cancel_subscription")
			require.Empty(t, none.LLM.ViaActions)
			require.Equal(t, commitlayer.StatusFail, none.Verdict.Lenses.Outcome)

			if *recordHistories {
				// The via branch of the Scenario workflow, replayed by
				// sandbox/bench's TestReplayRecordedHistories.
				recordHistory(t, s, bench.ScenarioWorkflowID(run.ID, "refund/prompt_injection"), "sandbox/bench",
					"scenario_llm_via-"+via+"_refund_prompt_injection.json")
				recordHistory(t, s, bench.ScenarioWorkflowID(run.ID, "cancel/unreachable_agent"), "sandbox/bench",
					"scenario_llm_via-"+via+"_cancel_unreachable_agent.json")
			}

			// The keys stay in the worker's memory.
			seen := []string{string(run.Raw), logs.String()}
			resp, err := s.m.Temporal.ListWorkflow(context.Background(), listRequest(fmt.Sprintf(`CommitLayerRun=%q`, run.ID)))
			require.NoError(t, err)
			require.Greater(t, len(resp.Executions), len(only), "the benchmark, its scenarios and their verifications")
			for _, ex := range resp.Executions {
				it := s.m.Temporal.GetWorkflowHistory(context.Background(), ex.Execution.WorkflowId, ex.Execution.RunId, false,
					enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
				for it.HasNext() {
					e, err := it.Next()
					require.NoError(t, err)
					b, err := protojson.Marshal(e)
					require.NoError(t, err)
					seen = append(seen, string(b))
				}
			}
			keys.mu.Lock()
			ks := append([]string(nil), keys.keys...)
			keys.mu.Unlock()
			require.GreaterOrEqual(t, len(ks), len(only))
			for _, k := range ks {
				require.NotEmpty(t, k)
				for _, txt := range seen {
					require.NotContains(t, txt, k)
				}
			}
		})
	}
}
