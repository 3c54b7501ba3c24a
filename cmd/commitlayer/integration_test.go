package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// stack is CommitLayer started for real: the dev server, Postgres, and a
// Main in this process (or a worker in another one).
type stack struct {
	t        *testing.T
	m        *Main
	env      map[string]string
	adminKey string
	http     *http.Client
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newStack starts a Main with the given roles on a task queue of its own,
// so no other worker takes its tasks.
func newStack(t *testing.T, roles Roles) *stack {
	t.Helper()
	return newStackOn(t, roles, testenv.TemporalAddress(t))
}

// newStackOn is newStack on the Temporal server at temporalAddr.
func newStackOn(t *testing.T, roles Roles, temporalAddr string) *stack {
	t.Helper()
	return newStackWith(t, roles, temporalAddr, nil)
}

// testDeployment is this test process's Worker Deployment (and, with
// "-benchmark", the benchmark's): one per process, not per stack, since a
// namespace holds a bounded number of deployments. Its tests run one at a
// time and each makes its build current at start, so tests in other
// packages (other builds) never re-route it.
var testDeployment = "commitlayer-test-" + randHex(6)

// newStackWith is newStackOn with more environment (or other values).
func newStackWith(t *testing.T, roles Roles, temporalAddr string, extra map[string]string) *stack {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL":             testenv.Postgres(t),
		"TEMPORAL_ADDRESS":         temporalAddr,
		"TEMPORAL_NAMESPACE":       testenv.Namespace(),
		"COMMITLAYER_ADDR":         "127.0.0.1:0",
		"COMMITLAYER_ADMIN_KEY":    "test-admin-" + randHex(12),
		"COMMITLAYER_TASK_QUEUE":   "commitlayer-test-" + randHex(6),
		"COMMITLAYER_DEPLOYMENT":   testDeployment,
		"COMMITLAYER_MAKE_CURRENT": "always",
		// Each stack has a task queue of its own in the one deployment.
		"COMMITLAYER_IGNORE_MISSING_TASK_QUEUES": "1",
		"COMMITLAYER_SANDBOX_DIR":                t.TempDir(),
		// The test's feeds are httptest servers on the loopback.
		"COMMITLAYER_ALLOW_PRIVATE_ADDRESSES": "1",
	}
	for k, v := range extra {
		env[k] = v
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := configFromEnv(roles)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	m := &Main{Config: cfg, Logger: logger}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Open(ctx, roles); err != nil {
		m.Close()
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return &stack{t: t, m: m, env: env, adminKey: cfg.AdminKey, http: &http.Client{Timeout: 30 * time.Second}}
}

// do sends a JSON (or YAML) request and decodes a JSON answer into out,
// requiring the status.
func (s *stack) do(key, method, path string, body any, want int, out any) {
	s.t.Helper()
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd, ctype = strings.NewReader(b), "application/yaml"
	default:
		buf, err := json.Marshal(b)
		require.NoError(s.t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, s.m.URL()+path, rd)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", ctype)
	resp, err := s.http.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	require.Equal(s.t, want, resp.StatusCode, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(s.t, json.Unmarshal(raw, out), "%s", raw)
	}
}

func (s *stack) tenant() string {
	var t struct {
		APIKey string `json:"api_key"`
	}
	s.do(s.adminKey, "POST", "/v1/admin/tenants", map[string]string{"name": s.t.Name()}, 201, &t)
	return t.APIKey
}

type actionView struct {
	Action  commitlayer.Action    `json:"action"`
	Verdict *commitlayer.Verdict  `json:"verdict"`
	History []commitlayer.Verdict `json:"history"`
}

// waitVerdict polls an action until cond holds for its history.
func (s *stack) waitVerdict(key, id string, timeout time.Duration, cond func([]commitlayer.Verdict) bool) []commitlayer.Verdict {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var v actionView
		s.do(key, "GET", "/v1/actions/"+id, nil, 200, &v)
		if cond(v.History) {
			return v.History
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("action %s: condition not met within %s; history %+v", id, timeout, v.History)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// payoutContract is a payout contract with a short window, so the lifecycle
// runs in seconds.
func payoutContract(id, settlement, watch string) string {
	return fmt.Sprintf(`id: %s
kind: action
subject: account
settlement: %s
watch: %s
sources: [ledger]
policy:
  - id: account_active
    rule: state.ledger.status == 'active'
effects:
  - id: payout
    source: ledger
    type: payout_sent
    count: 1
    expect: effect.amount == params.amount
    reversed_by:
      source: ledger
      type: payout_returned
      where: effect.payout_id == original.payout_id
`, id, settlement, watch)
}

func fact(typ, subject, id string, at time.Time, attrs map[string]any) map[string]any {
	return map[string]any{"source": "ledger", "type": typ, "subject": subject, "external_id": id,
		"occurred_at": at.UTC().Format(time.RFC3339Nano), "attrs": attrs}
}

func TestVerifyLifecycleOnDevServer(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	key := s.tenant()
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_fast", "3s", "8s"), 201, nil)

	now := time.Now().UTC()
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_1", "acc-1-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_1", "po-1", now.Add(time.Second), map[string]any{"payout_id": "po_1", "amount": 5000}),
	}}, 200, nil)
	var created struct {
		ID         string `json:"id"`
		VerdictURL string `json:"verdict_url"`
	}
	s.do(key, "POST", "/v1/actions", map[string]any{
		"contract": "payout_fast", "agent": "agent-1", "subject": "account:acc_1",
		"params": map[string]any{"amount": 5000}, "requested_at": now.Format(time.RFC3339Nano),
		"claim": map[string]string{"status": "success"},
	}, 202, &created)

	// Provisional first.
	h := s.waitVerdict(key, created.ID, 30*time.Second, func(h []commitlayer.Verdict) bool { return len(h) >= 1 })
	require.True(t, h[0].Provisional)
	require.Equal(t, commitlayer.StatusPass, h[0].Status)
	require.Equal(t, 1, h[0].Version)

	// Final after the settlement timer.
	h = s.waitVerdict(key, created.ID, 30*time.Second, func(h []commitlayer.Verdict) bool {
		return len(h) >= 2 && !h[len(h)-1].Provisional
	})
	final := h[len(h)-1]
	require.Equal(t, commitlayer.StatusPass, final.Status)
	require.False(t, final.EvaluatedAt.Before(now.Add(3*time.Second)), "final verdict before the window closed")

	// A reversal after settlement flips it.
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("payout_returned", "account:acc_1", "po-1-returned", time.Now().UTC(), map[string]any{"payout_id": "po_1", "amount": 5000}),
	}}, 200, nil)
	h = s.waitVerdict(key, created.ID, 30*time.Second, func(h []commitlayer.Verdict) bool {
		return h[len(h)-1].Status == commitlayer.StatusFail
	})
	flipped := h[len(h)-1]
	require.Equal(t, commitlayer.LensOutcome, flipped.Findings[0].Lens)
	require.Equal(t, commitlayer.CodeEffectReversed, flipped.Findings[0].Code)
	require.Equal(t, final.Version+1, flipped.Version)

	// The recheck update answers the current verdict.
	var rc struct {
		Verdict commitlayer.Verdict `json:"verdict"`
	}
	s.do(key, "POST", "/v1/actions/"+created.ID+"/recheck", nil, 200, &rc)
	require.Equal(t, commitlayer.StatusFail, rc.Verdict.Status)

	// The verification is findable in Temporal by its verdict.
	tenantID := tenantOfKey(s, key)
	require.Eventually(t, func() bool {
		resp, err := s.m.Temporal.ListWorkflow(context.Background(), listRequest(
			fmt.Sprintf(`CommitLayerVerdict="FAIL" AND CommitLayerTenant=%q`, tenantID)))
		return err == nil && len(resp.Executions) == 1
	}, 20*time.Second, 200*time.Millisecond)

	// The watch ends and the workflow completes with the flipped verdict.
	wfID := workflows.VerifyWorkflowID(tenantID, created.ID)
	var res workflows.VerifyActionResult
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.m.Temporal.GetWorkflow(ctx, wfID, "").Get(ctx, &res))
	require.Equal(t, commitlayer.StatusFail, res.Verdict.Status)
	if *recordHistories {
		recordHistory(t, s, wfID, "workflows", "verify_lifecycle.json")
	}
}

var recordHistories = flag.Bool("record-histories", false, "write the workflows' histories to workflows/testdata/histories for the replay tests")

// recordHistory writes a closed workflow's history where the replay test
// reads it.
func recordHistory(t *testing.T, s *stack, workflowID, dir, name string) {
	t.Helper()
	writeHistory(t, fetchHistory(t, s, workflowID), dir, name)
}

// writeHistory writes a history where the replay test reads it.
func writeHistory(t *testing.T, h *historypb.History, dir, name string) {
	t.Helper()
	raw, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	path := filepath.Join("..", "..", dir, "testdata", "histories", name)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	t.Logf("recorded %d events to %s", len(h.Events), path)
}

func listRequest(query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: testenv.Namespace(), Query: query}
}

// TestWorkerKilledWhileVerificationsWait kills the worker process while 50
// verifications wait on their settlement timers; a new worker process
// finishes all 50, with exactly one provisional and one final verdict each.
func TestWorkerKilledWhileVerificationsWait(t *testing.T) {
	bin := commitlayerBinary(t)

	s := newStack(t, Roles{API: true}) // the API here, the worker in a process of its own
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(bin, "worker")
		cmd.Env = os.Environ() // newStack's t.Setenv: same database, dev server and task queue
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("worker %d log:\n%s", cmd.Process.Pid, logs.String())
			}
		})
		return cmd
	}
	w1 := startWorker()

	key := s.tenant()
	// 45 s of settlement: on a loaded machine the 50 provisional verdicts
	// have taken over 20 s, and the first then settled before the kill.
	ids, _ := s.sleepingPayouts(key, "payout_kill", "45s", 50)
	require.NoError(t, w1.Process.Kill())
	_ = w1.Wait()
	// The premise: the worker died while every verification still waited
	// on its timer (no final verdict yet).
	s.requireStillSleeping(key, ids, "the worker was killed")

	startWorker()
	s.requireOneProvisionalOneFinal(key, ids, 2*time.Minute)
	// And every workflow completed (watch 0s).
	s.requireAllClosed(key, ids)
}

// workflowIDFor resolves an action's verification workflow id.
func workflowIDFor(s *stack, key, actionID string) string {
	tenant := tenantOfKey(s, key)
	return workflows.VerifyWorkflowID(tenant, actionID)
}

func tenantOfKey(s *stack, key string) string {
	tn, err := s.m.DB.TenantByAPIKey(context.Background(), key)
	require.NoError(s.t, err)
	return tn.ID
}

// TestRegressionSubsetThroughAdminAPI runs the regression subset of the
// failure matrix (one scenario per workflow and per family) through the
// admin API: Benchmark → Scenario children → VerifyAction grandchildren on
// the dev server, every row compared with the oracle.
func TestRegressionSubsetThroughAdminAPI(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	subset := catalogue.Regression
	require.GreaterOrEqual(t, len(subset), 14)

	var started struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"only": subset, "concurrency": 4}, 202, &started)
	require.Equal(t, "running", started.Status)

	var run struct {
		ID       string         `json:"id"`
		Status   string         `json:"status"`
		Summary  matrix.Summary `json:"summary"`
		Results  []matrix.Row   `json:"results"`
		Markdown string         `json:"markdown"`
		LogTail  string         `json:"log_tail"`
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		s.do(s.adminKey, "GET", "/v1/admin/benchmark/"+started.ID, nil, 200, &run)
		if run.Status != "running" {
			break
		}
		require.True(t, time.Now().Before(deadline), "benchmark still running: %s", run.LogTail)
		time.Sleep(500 * time.Millisecond)
	}
	require.Equal(t, "done", run.Status, run.LogTail)
	require.Len(t, run.Results, len(subset))
	for _, r := range run.Results {
		require.Empty(t, r.Error, r.ID)
		require.True(t, r.Agree.Both(), "%s: truth %s/%s, verdict %s/%s %+v", r.ID, r.Truth.Outcome, r.Truth.Policy,
			r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy, r.Verdict.Findings)
	}
	require.Equal(t, len(subset), run.Summary.Scenarios)
	require.Zero(t, run.Summary.FalseNegatives.N)
	require.Zero(t, run.Summary.FalsePositives.N)
	require.Contains(t, run.Markdown, "| Metric | Value |")

	// Listed, and tenant keys may not see it.
	var list struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	s.do(s.adminKey, "GET", "/v1/admin/benchmark", nil, 200, &list)
	found := false
	for _, r := range list.Runs {
		found = found || r.ID == started.ID
	}
	require.True(t, found)
	s.do(s.tenant(), "GET", "/v1/admin/benchmark/"+started.ID, nil, 403, nil)

	if *recordHistories {
		recordHistory(t, s, bench.BenchmarkWorkflowID(started.ID), "sandbox/bench", "benchmark_subset.json")
		recordHistory(t, s, bench.ScenarioWorkflowID(started.ID, subset[0]), "sandbox/bench", "scenario_"+sanitizeName(subset[0])+".json")
	}
}

func sanitizeName(id string) string { return strings.NewReplacer("/", "_").Replace(id) }

// sleepingPayouts posts contract (settlement, no watch) and n payouts, each
// with its opening and its payout fact, and waits for every provisional
// verdict: n verifications then sleep on their settlement timers. It
// returns the action ids and the requested_at they share.
func (s *stack) sleepingPayouts(key, contract, settlement string, n int) ([]string, time.Time) {
	s.t.Helper()
	s.do(key, "POST", "/v1/contracts", payoutContract(contract, settlement, "0s"), 201, nil)
	now := time.Now().UTC()
	var facts []any
	for i := range n {
		acc := fmt.Sprintf("account:acc_%d", i)
		facts = append(facts,
			fact("account_opened", acc, fmt.Sprintf("open-%d", i), now.Add(-time.Hour), map[string]any{"status": "active"}),
			fact("payout_sent", acc, fmt.Sprintf("po-%d", i), now.Add(time.Second), map[string]any{"payout_id": fmt.Sprint(i), "amount": 100 + i}))
	}
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": facts}, 200, nil)
	ids := make([]string, n)
	for i := range n {
		var created struct {
			ID string `json:"id"`
		}
		s.do(key, "POST", "/v1/actions", map[string]any{
			"contract": contract, "agent": "agent-1", "subject": fmt.Sprintf("account:acc_%d", i),
			"params": map[string]any{"amount": 100 + i}, "requested_at": now.Format(time.RFC3339Nano),
			"claim": map[string]string{"status": "success"},
		}, 202, &created)
		ids[i] = created.ID
	}
	for _, id := range ids {
		h := s.waitVerdict(key, id, 60*time.Second, func(h []commitlayer.Verdict) bool { return len(h) >= 1 })
		require.True(s.t, h[0].Provisional)
	}
	// The first verdict can come from the API's early pass, ahead of the
	// verification's first workflow task: the premise, every verification
	// asleep on its timer in a worker, is that task having run.
	for _, id := range ids {
		wid := workflowIDFor(s, key, id)
		require.Eventually(s.t, func() bool {
			for _, e := range fetchHistory(s.t, s, wid).GetEvents() {
				if e.GetTimerStartedEventAttributes() != nil {
					return true
				}
			}
			return false
		}, 60*time.Second, 100*time.Millisecond, "action %s: its verification never started its settlement timer", id)
	}
	return ids, now
}

// requireStillSleeping checks the premise of a test that disturbs sleeping
// verifications: none has its final verdict yet.
func (s *stack) requireStillSleeping(key string, ids []string, before string) {
	s.t.Helper()
	for _, id := range ids {
		var v actionView
		s.do(key, "GET", "/v1/actions/"+id, nil, 200, &v)
		require.Len(s.t, v.History, 1, "action %s settled before %s", id, before)
	}
}

// requireOneProvisionalOneFinal waits for every action's final verdict and
// requires exactly one provisional and one final PASS each.
func (s *stack) requireOneProvisionalOneFinal(key string, ids []string, timeout time.Duration) {
	s.t.Helper()
	var wg sync.WaitGroup
	histories := make([][]commitlayer.Verdict, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			histories[i] = s.waitVerdict(key, id, timeout, func(h []commitlayer.Verdict) bool {
				return len(h) >= 2 && !h[len(h)-1].Provisional
			})
		}()
	}
	wg.Wait()
	for i, h := range histories {
		require.Len(s.t, h, 2, "action %s: one provisional and one final verdict, no duplicate", ids[i])
		require.True(s.t, h[0].Provisional)
		require.False(s.t, h[1].Provisional)
		require.Equal(s.t, []int{1, 2}, []int{h[0].Version, h[1].Version})
		require.Equal(s.t, commitlayer.StatusPass, h[1].Status)
	}
}

// requireAllClosed waits for every action's verification workflow to close.
func (s *stack) requireAllClosed(key string, ids []string) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		for _, id := range ids {
			d, err := s.m.Temporal.DescribeWorkflow(context.Background(), workflowIDFor(s, key, id), "")
			if err != nil || d.WorkflowCloseTime == nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 250*time.Millisecond)
}
