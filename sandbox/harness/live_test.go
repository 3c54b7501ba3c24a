package harness

import (
	"context"
	"database/sql"
	"maps"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

func lookup(t *testing.T, id string) catalogue.Scenario {
	t.Helper()
	sc, ok := catalogue.Lookup(id)
	require.True(t, ok, id)
	return sc
}

// rules arms the same rules whatever the scenario's enterprise.
func rules(rs ...chaos.Rule) func(*catalogue.Env) []chaos.Rule {
	return func(*catalogue.Env) []chaos.Rule { return rs }
}

// count runs a one-value query on a system's file.
func count(t *testing.T, l *Live, system, q string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+l.Env.Enterprise.DBPath(system)+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var n int64
	require.NoError(t, db.QueryRow(q).Scan(&n))
	return n
}

func start(t *testing.T, sc catalogue.Scenario) *Live {
	t.Helper()
	l, err := Start(context.Background(), filepath.Join(t.TempDir(), "nested", "dir"), sc)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// Each step can be called again (a retried activity) without acting twice.
func TestLiveStepsRunOnce(t *testing.T) {
	ctx := context.Background()
	l := start(t, lookup(t, "payout/daily_total_exceeded"))
	p1, err := l.RunPrior(ctx)
	require.NoError(t, err)
	require.Len(t, p1, 2)
	p2, err := l.RunPrior(ctx)
	require.NoError(t, err)
	require.Equal(t, p1, p2)
	r1, err := l.RunAgent(ctx)
	require.NoError(t, err)
	r2, err := l.RunAgent(ctx)
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	require.Equal(t, r1, l.Env.Result)
	require.EqualValues(t, 3, count(t, l, "ledger", `SELECT COUNT(*) FROM payouts`))
	for _, p := range p1 {
		require.True(t, p.Action.RequestedAt.Before(r1.Action.RequestedAt), "prior runs come first")
		require.Equal(t, r1.Action.Agent, p.Action.Agent)
	}

	did, err := l.AfterSettlement(ctx)
	require.NoError(t, err)
	require.False(t, did, "this scenario has no after-settlement injection")

	truth, stray, err := l.Truth(ctx)
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusFail, truth.Policy, "%s", truth)
	require.Empty(t, stray)
}

func TestLiveAfterSettlementOnce(t *testing.T) {
	ctx := context.Background()
	l := start(t, lookup(t, "trade/fill_busted_after_settlement"))
	_, err := l.AfterSettlement(ctx)
	require.ErrorContains(t, err, "the agent has not run")
	_, err = l.RunAgent(ctx)
	require.NoError(t, err)
	for range 2 {
		did, err := l.AfterSettlement(ctx)
		require.NoError(t, err)
		require.True(t, did)
	}
	require.EqualValues(t, 1, count(t, l, "broker", `SELECT COUNT(*) FROM fills WHERE status = 'busted'`))
	truth, _, err := l.Truth(ctx)
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusFail, truth.Outcome)
}

// RunAgent runs the prior tasks first when RunPrior was not called, so the
// systems hold what the scenario says.
func TestLiveRunAgentRunsPriorFirst(t *testing.T) {
	ctx := context.Background()
	l := start(t, lookup(t, "deploy/too_many_deploys"))
	_, err := l.RunAgent(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, count(t, l, "platform", `SELECT COUNT(*) FROM deployments`))
	prior, err := l.RunPrior(ctx)
	require.NoError(t, err)
	require.Len(t, prior, 3)
}

func TestLiveConcurrentCallsRunOnce(t *testing.T) {
	ctx := context.Background()
	l := start(t, lookup(t, "refund/lost_response_retry_no_key"))
	var wg sync.WaitGroup
	results := make([]agent.Result, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := l.RunAgent(ctx)
			if err == nil {
				results[i] = r
			}
			_ = l.ChaosLog()
			_ = l.ExtractClient()
		}()
	}
	wg.Wait()
	for _, r := range results {
		require.Equal(t, results[0], r)
	}
	require.EqualValues(t, 2, count(t, l, "payments", `SELECT COUNT(*) FROM refunds`), "one run: a lost response and one retry")
}

func TestLiveDownAndExtractClient(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		id   string
		down []string
	}{
		{"cancel/unreachable_verifier", []string{"crm"}},
		{"cancel/stale_read", nil},
		{"cancel/unreachable_agent", nil}, // the agent's chaos, not the connectors'
		{"cancel/baseline", nil},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			l := start(t, lookup(t, tc.id))
			require.Equal(t, tc.down, l.Down)
			resp, err := l.ExtractClient().Get(l.Env.Enterprise.SystemURL("crm") + "/events?after=0")
			if tc.down != nil {
				require.ErrorContains(t, err, "connection refused")
				require.NotEmpty(t, l.ChaosLog(), "the connectors' chaos fired")
				return
			}
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			_ = ctx
		})
	}
	// A rule making every system unreachable puts them all down.
	sc := lookup(t, "refund/baseline")
	sc.ExtractChaos = rules(chaos.Rule{Mode: chaos.Unreachable}, chaos.Rule{System: "crm", Call: 2, Mode: chaos.Unreachable})
	l := start(t, sc)
	require.Equal(t, []string{"broker", "crm", "ledger", "orders", "payments", "platform", "tickets"}, l.Down)
}

func TestLiveBadInput(t *testing.T) {
	ctx := context.Background()
	base := lookup(t, "refund/baseline")
	cases := []struct {
		name string
		edit func(*catalogue.Scenario)
		err  string
	}{
		{"unknown workflow", func(s *catalogue.Scenario) { s.Task.Process = "teleport" }, "unknown workflow"},
		{"subject of the wrong type", func(s *catalogue.Scenario) { s.Task.Subject = "ticket:t_1" }, "acts on a order"},
		{"missing param", func(s *catalogue.Scenario) { delete(s.Task.Params, "amount") }, `param "amount"`},
		{"bad prior task", func(s *catalogue.Scenario) { s.Prior = []agent.Task{{Process: "refund"}} }, "prior task 1"},
		{"bad seed", func(s *catalogue.Scenario) {
			s.Seed = func(seed *sandbox.Seed) { seed.Order("o_1001").CustomerID = "c_404" }
		}, "c_404"},
		{"bad connector rule", func(s *catalogue.Scenario) {
			s.ExtractChaos = rules(chaos.Rule{System: "payments", Mode: chaos.Error, Status: 418})
		}, "connectors' chaos"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := base
			sc.Task.Params = maps.Clone(base.Task.Params)
			tc.edit(&sc)
			l, err := Start(ctx, t.TempDir(), sc)
			require.ErrorContains(t, err, tc.err)
			require.Nil(t, l)
		})
	}

	t.Run("bad agent rule", func(t *testing.T) {
		sc := base
		sc.AgentChaos = rules(chaos.Rule{Mode: chaos.Before})
		l := start(t, sc)
		_, err := l.RunAgent(ctx)
		require.ErrorContains(t, err, "agent's chaos")
		_, _, err = l.Truth(ctx)
		require.ErrorContains(t, err, "the agent has not run")
	})

	t.Run("after close", func(t *testing.T) {
		l, err := Start(ctx, t.TempDir(), lookup(t, "payout/returned_after_settlement"))
		require.NoError(t, err)
		_, err = l.RunAgent(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		require.NoError(t, l.Close(), "closing twice is fine")
		_, _, err = l.Truth(ctx)
		require.ErrorContains(t, err, "closed")
		_, err = l.AfterSettlement(ctx)
		require.ErrorContains(t, err, "closed")
		_, err = l.RunPrior(ctx)
		require.ErrorContains(t, err, "closed")
	})

	t.Run("after-settlement injection that fails", func(t *testing.T) {
		sc := lookup(t, "payout/returned_after_settlement")
		sc.Profile = agent.Profile{NoCalls: true} // no payout to return
		l := start(t, sc)
		_, err := l.RunAgent(ctx)
		require.NoError(t, err)
		did, err := l.AfterSettlement(ctx)
		require.True(t, did)
		require.ErrorContains(t, err, "no successful send_payout call")
	})
}

func TestLiveChaosLog(t *testing.T) {
	ctx := context.Background()
	l := start(t, lookup(t, "refund/stale_read"))
	_, err := l.RunAgent(ctx)
	require.NoError(t, err)
	require.Empty(t, l.ChaosLog(), "nothing fired yet")
	resp, err := l.ExtractClient().Get(l.Env.Enterprise.SystemURL("payments") + "/events?after=0")
	require.NoError(t, err)
	resp.Body.Close()
	log := l.ChaosLog()
	require.Len(t, log, 1)
	require.Contains(t, log[0], "extract ")
	require.Contains(t, log[0], "stale_read")
}

// Start builds the scenario's enterprise in dir (created when missing):
// the default seed as the scenario adjusts it, the systems served on a
// loopback port, and two chaos transports. The connectors' rules are armed
// now, so a stale read's snapshot predates everything the scenario does.
func Start(ctx context.Context, dir string, sc catalogue.Scenario) (*Live, error) {
	return StartWith(ctx, dir, sc, StartOptions{})
}
