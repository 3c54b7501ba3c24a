package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/worker"
	"github.com/commitlayer/commitlayer/workflows"
)

// rolloutChange is the change build B makes to VerifyAction: a step (a memo
// naming the build) before the verification, guarded by GetVersion as the
// project's workflow changes are.
const rolloutChange = "rollout-test-memo"

// verifyActionB is build B's VerifyAction: guarded, so a verification that
// started on build A replays on B along A's path.
func verifyActionB(ctx workflow.Context, in workflows.VerifyActionInput) (workflows.VerifyActionResult, error) {
	if workflow.GetVersion(ctx, rolloutChange, workflow.DefaultVersion, 1) == 1 {
		if err := workflow.UpsertMemo(ctx, map[string]any{"build": "B"}); err != nil {
			return workflows.VerifyActionResult{}, err
		}
	}
	return workflows.VerifyAction(ctx, in)
}

// verifyActionUnguarded is the same change without the guard: what a
// rollout must not ship.
func verifyActionUnguarded(ctx workflow.Context, in workflows.VerifyActionInput) (workflows.VerifyActionResult, error) {
	if err := workflow.UpsertMemo(ctx, map[string]any{"build": "B"}); err != nil {
		return workflows.VerifyActionResult{}, err
	}
	return workflows.VerifyAction(ctx, in)
}

// TestRolloutOfANewWorkerBuild rolls out build B beside build A the way
// docs/operations.md says: A's workers hold 50 verifications sleeping on
// 20 s settlement windows and a benchmark run in flight; B's workers start
// beside them (with a guarded change in VerifyAction); B is ramped, then made
// current; A stops once what is pinned to it has drained. Every
// verification ends with one provisional and one final verdict, its final
// pass on B; no workflow task fails; the benchmark run completes on A; the
// deployments' routing and drainage are read back through the SDK.
func TestRolloutOfANewWorkerBuild(t *testing.T) {
	ctx := context.Background()
	buildA, buildB := "A-"+randHex(4), "B-"+randHex(4)
	// Deployments of its own: it leaves an old build draining and routes
	// to builds no other test runs.
	s := newStackWith(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true}, testenv.TemporalAddress(t),
		map[string]string{"COMMITLAYER_BUILD_ID": buildA, "COMMITLAYER_DEPLOYMENT": "commitlayer-rollout-" + randHex(6)})
	c := s.m.Temporal
	product, benchDep := s.m.Config.Deployment, s.m.Config.Sandbox.Deployment
	targets := map[string]worker.Deployment{
		product:  {Name: product, BuildID: buildB},
		benchDep: {Name: benchDep, BuildID: buildB, IgnoreMissingQueues: true},
	}

	st, err := worker.DescribeDeployment(ctx, c, product)
	require.NoError(t, err)
	require.Equal(t, buildA, st.Current, "a fresh fleet's first build is current")

	// 50 verifications on A, each waiting on its settlement timer.
	key := s.tenant()
	tenant := tenantOfKey(s, key)
	const n = 50
	ids, now := s.sleepingPayouts(key, "payout_rollout", "20s", n)
	// A benchmark run in flight on A, one scenario at a time.
	subset := catalogue.Regression
	var started struct {
		ID string `json:"id"`
	}
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"only": subset, "concurrency": 1}, 202, &started)

	// Build B beside A: same queues and deployments, its own build ID,
	// leaving the routing to the operator.
	mB := openMain(t, Roles{API: true, Worker: true, BenchmarkWorker: true}, func(cfg *Config) {
		cfg.BuildID = buildB
		cfg.MakeCurrent = worker.CurrentNever
	}, func(m *Main) {
		m.ProductWorker.RegisterWorkflowWithOptions(verifyActionB, workflow.RegisterOptions{
			Name: "VerifyAction", VersioningBehavior: worker.VerifyActionBehavior, DisableAlreadyRegisteredCheck: true})
	})
	st, err = worker.DescribeDeployment(ctx, c, product)
	require.NoError(t, err)
	require.Equal(t, buildA, st.Current, "a new build does not take over by itself")

	// Ramp B, then make it current, on both deployments.
	for _, dep := range []string{product, benchDep} {
		require.NoError(t, worker.SetRamping(ctx, c, targets[dep], 25, "rollout test"))
		st, err := worker.DescribeDeployment(ctx, c, dep)
		require.NoError(t, err)
		require.Equal(t, buildA, st.Current, dep)
		require.Equal(t, buildB, st.Ramping, dep)
		require.InDelta(t, 25, st.RampPercent, 0.01, dep)
	}
	for _, dep := range []string{product, benchDep} {
		require.NoError(t, worker.SetCurrent(ctx, c, targets[dep], "rollout test"))
		st, err := worker.DescribeDeployment(ctx, c, dep)
		require.NoError(t, err)
		require.Equal(t, buildB, st.Current, dep)
		require.Empty(t, st.Ramping, dep)
	}
	var inFlight runView
	s.do(s.adminKey, "GET", "/v1/admin/benchmark/"+started.ID, nil, 200, &inFlight)
	require.Equal(t, "running", inFlight.Status, "the premise: the benchmark run is still in flight when B becomes current")
	// The premise: every verification still waits on its timer. Then each
	// settles (on B), once.
	s.requireStillSleeping(key, ids, "B was current")
	s.requireOneProvisionalOneFinal(key, ids, 2*time.Minute)

	// The benchmark run completes, on A.
	run := waitRun(t, s, started.ID, 5*time.Minute)
	require.Equal(t, "done", run.Status, run.LogTail)
	require.Len(t, run.Results, len(subset))
	for _, r := range run.Results {
		require.True(t, r.Agree.Both(), "%s disagrees", r.ID)
	}
	d, err := c.DescribeWorkflow(ctx, bench.BenchmarkWorkflowID(started.ID), "")
	require.NoError(t, err)
	vi := d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo()
	require.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, vi.GetBehavior())
	require.Equal(t, buildA, vi.GetDeploymentVersion().GetBuildId(), "the run finished on the build it started on")
	last := subset[len(subset)-1]
	d, err = c.DescribeWorkflow(ctx, bench.ScenarioWorkflowID(started.ID, last), "")
	require.NoError(t, err)
	require.Equal(t, buildA, d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId(),
		"a scenario started after B became current still runs on its run's build")

	// No workflow task failed; every verification's last task ran on B.
	onB := 0
	for _, id := range ids {
		wid := workflows.VerifyWorkflowID(tenant, id)
		var lastBuild string
		it := c.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			require.NotEqual(t, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, ev.GetEventType(), "%s: %v", wid, ev.GetWorkflowTaskFailedEventAttributes())
			if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
				lastBuild = a.GetDeploymentVersion().GetBuildId()
			}
		}
		if lastBuild == buildB {
			onB++
		}
	}
	require.Equal(t, n, onB, "every verification moved to B at its settlement (auto-upgrade)")

	// A drains on both deployments, and its workers stop.
	for _, dep := range []string{product, benchDep} {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		require.NoError(t, worker.WaitDrained(wctx, c, dep, buildA, 500*time.Millisecond), dep)
		cancel()
		// The deployment's summary of its versions follows the version's
		// own drainage a moment later.
		require.Eventually(t, func() bool {
			st, err := worker.DescribeDeployment(ctx, c, dep)
			if err != nil {
				return false
			}
			va, okA := versionOf(st, buildA)
			vb, okB := versionOf(st, buildB)
			return okA && okB && va.Drainage == "drained" && vb.Current && !va.Current
		}, 30*time.Second, 250*time.Millisecond, "%s: A drained, B current", dep)
	}
	s.m.Close()

	// B alone verifies a new action, through its own path (the guarded step
	// recorded).
	key2 := func() string {
		var tn struct {
			APIKey string `json:"api_key"`
		}
		sB := &stack{t: t, m: mB, adminKey: s.adminKey, http: s.http}
		sB.do(s.adminKey, "POST", "/v1/admin/tenants", map[string]string{"name": "after-rollout"}, 201, &tn)
		sB.do(tn.APIKey, "POST", "/v1/contracts", payoutContract("payout_rollout", "2s", "0s"), 201, nil)
		at := time.Now().UTC()
		sB.do(tn.APIKey, "POST", "/v1/facts", map[string]any{"facts": []any{
			fact("account_opened", "account:acc_new", "open-new", now.Add(-time.Hour), map[string]any{"status": "active"}),
			fact("payout_sent", "account:acc_new", "po-new", at.Add(500*time.Millisecond), map[string]any{"payout_id": "new", "amount": 7}),
		}}, 200, nil)
		var created struct {
			ID string `json:"id"`
		}
		sB.do(tn.APIKey, "POST", "/v1/actions", map[string]any{
			"contract": "payout_rollout", "agent": "agent-1", "subject": "account:acc_new",
			"params": map[string]any{"amount": 7}, "requested_at": at.Format(time.RFC3339Nano),
			"claim": map[string]string{"status": "success"},
		}, 202, &created)
		h := sB.waitVerdict(tn.APIKey, created.ID, time.Minute, func(h []commitlayer.Verdict) bool {
			return len(h) >= 2 && !h[len(h)-1].Provisional
		})
		require.Equal(t, commitlayer.StatusPass, h[len(h)-1].Status)
		wid := workflows.VerifyWorkflowID(tenantOfKey(sB, tn.APIKey), created.ID)
		require.Eventually(t, func() bool {
			d, err := mB.Temporal.DescribeWorkflow(ctx, wid, "")
			return err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetMemo().GetFields()["build"] != nil
		}, 30*time.Second, 200*time.Millisecond, "B's guarded step ran for a verification that started on B")
		return wid
	}()

	// The guard is what made this safe: the same change unguarded does not
	// replay a verification that started on A.
	hist := fetchHistory(t, &stack{t: t, m: mB}, workflows.VerifyWorkflowID(tenant, ids[0]))
	guarded := sdkworker.NewWorkflowReplayer()
	guarded.RegisterWorkflowWithOptions(verifyActionB, workflow.RegisterOptions{Name: "VerifyAction"})
	require.NoError(t, guarded.ReplayWorkflowHistory(nil, hist))
	unguarded := sdkworker.NewWorkflowReplayer()
	unguarded.RegisterWorkflowWithOptions(verifyActionUnguarded, workflow.RegisterOptions{Name: "VerifyAction"})
	require.Error(t, unguarded.ReplayWorkflowHistory(nil, hist), "an unguarded change must not replay an A history")
	require.NotEmpty(t, key2)
}

// versionOf returns the state of one build, if the deployment has it.
func versionOf(s worker.DeploymentState, buildID string) (worker.VersionState, bool) {
	for _, v := range s.Versions {
		if v.BuildID == buildID {
			return v, true
		}
	}
	return worker.VersionState{}, false
}
