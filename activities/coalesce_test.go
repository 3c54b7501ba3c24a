package activities_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/metrics"
)

type extracted struct {
	res activities.ExtractResult
	err error
}

// passPull runs a pass's pull (Extract with FreshAsOf) in the background.
// fresh carries no monotonic reading, as a time from the workflow does not.
func (fx *fixture) passPull(action string, fresh time.Time) <-chan extracted {
	out := make(chan extracted, 1)
	go func() {
		res, err := fx.acts.Extract(context.Background(), activities.ExtractInput{
			TenantID: fx.tenant, ActionID: action, FreshAsOf: fresh.Round(0)})
		out <- extracted{res, err}
	}()
	return out
}

// awaitRequest waits for the feed's next held request.
func awaitRequest(t *testing.T, arrived <-chan struct{}) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("gave up waiting for a request to the feed")
	}
}

// waitFor waits until cond holds (a synchronisation, not a timing
// assertion: the deadline only stops a hung test).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPassPullsOfATenantAreShared(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	arrived, release := fx.feed.holdRequests(t)

	const n = 8
	answers := []<-chan extracted{fx.passPull("a0", time.Now())}
	awaitRequest(t, arrived) // the first pass's pull is in flight
	// The others were scheduled after it started: it cannot cover them,
	// and they share the one pull queued behind it.
	for i := 1; i < n; i++ {
		answers = append(answers, fx.passPull("a"+strconv.Itoa(i), time.Now()))
	}
	waitFor(t, "every pass to wait on a pull", func() bool {
		s := activities.PassPullStats(fx.acts)
		return s.Pulled+s.Joined == n
	})
	release <- struct{}{}
	awaitRequest(t, arrived) // the queued pull
	release <- struct{}{}
	for _, a := range answers {
		got := <-a
		require.NoError(t, got.err)
		require.Empty(t, got.res.Unreachable)
	}
	require.Equal(t, 2, fx.feed.requests(), "%d passes, one pull in flight and one queued", n)
	require.Equal(t, activities.PullStats{Pulled: 2, Joined: n - 2}, activities.PassPullStats(fx.acts))
	// The new fact was stored once, with one notice, by the first pull,
	// which spares the pass that started it.
	notices := fx.notices(t)
	require.Len(t, notices, 1)
	require.Equal(t, "a0", notices[0].ExceptActionID)
}

func TestPassPullSeesAFactThatLandedAfterAnEarlierPullStarted(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	arrived, release := fx.feed.holdRequests(t)
	first := fx.passPull("a1", time.Now())
	awaitRequest(t, arrived) // the first pull has read the feed: it will not see what lands now
	fx.feed.add("payout_sent", "account:acc_2", fx.now, map[string]any{"payout_id": "p2", "amount": 100})
	second := fx.passPull("a2", time.Now()) // scheduled after the fact landed
	waitFor(t, "the second pass to queue a pull", func() bool { return activities.PassPullStats(fx.acts).Pulled == 2 })
	release <- struct{}{}
	r1 := <-first
	require.NoError(t, r1.err)
	require.Equal(t, []commitlayer.Subject{"account:acc_1"}, r1.res.Subjects)
	awaitRequest(t, arrived)
	release <- struct{}{}
	r2 := <-second
	require.NoError(t, r2.err)
	require.Equal(t, []commitlayer.Subject{"account:acc_2"}, r2.res.Subjects, "the second pass was served the first pull")
	facts, err := fx.db.FactsAbout(context.Background(), fx.tenant, []commitlayer.Subject{"account:acc_2"})
	require.NoError(t, err)
	require.Len(t, facts, 1)
	require.Equal(t, 2, fx.feed.requests())
}

func TestPassPullSkippedWhenAPullAfterItsTimeReadEverything(t *testing.T) {
	fx := newFixture(t)
	scheduled := time.Now()
	r := <-fx.passPull("a1", scheduled)
	require.NoError(t, r.err)
	require.Equal(t, 1, fx.feed.requests())

	// A pass scheduled before that pull started is covered by it.
	r = <-fx.passPull("a2", scheduled)
	require.NoError(t, r.err)
	require.Empty(t, r.res.Unreachable)
	require.Equal(t, 1, fx.feed.requests(), "the covered pass pulled")
	require.Equal(t, activities.PullStats{Pulled: 1, Skipped: 1}, activities.PassPullStats(fx.acts))

	// One scheduled after it pulls again, and so does a pass without
	// FreshAsOf (its pull is its own).
	r = <-fx.passPull("a3", time.Now())
	require.NoError(t, r.err)
	require.Equal(t, 2, fx.feed.requests())
	fx.extract(t)
	require.Equal(t, 3, fx.feed.requests())
}

func TestPassPullUnreachableSourceCoversNobody(t *testing.T) {
	fx := newFixture(t)
	fx.feed.mu.Lock()
	fx.feed.down = true
	fx.feed.mu.Unlock()
	scheduled := time.Now()
	for i := range 2 {
		r := <-fx.passPull("a", scheduled)
		require.NoError(t, r.err)
		require.Contains(t, r.res.Unreachable, "ledger")
		require.Equal(t, i+1, fx.feed.requests(), "a pull with an unreachable source covered the next pass")
	}
	fx.feed.mu.Lock()
	fx.feed.down = false
	fx.feed.mu.Unlock()
	r := <-fx.passPull("a", scheduled)
	require.NoError(t, r.err)
	require.Empty(t, r.res.Unreachable)
	require.Equal(t, 3, fx.feed.requests())
	// Now the source was read: the same pass is covered.
	r = <-fx.passPull("a", scheduled)
	require.NoError(t, r.err)
	require.Equal(t, 3, fx.feed.requests())
	require.Equal(t, activities.PullStats{Pulled: 3, Skipped: 1}, activities.PassPullStats(fx.acts))
}

func TestPassPullWaiterCancelledLeavesThePullToTheOthers(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	arrived, release := fx.feed.holdRequests(t)
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() {
		_, err := fx.acts.Extract(ctx, activities.ExtractInput{TenantID: fx.tenant, ActionID: "a1", FreshAsOf: time.Now().Round(0)})
		leader <- err
	}()
	awaitRequest(t, arrived)
	// A pass scheduled before the pull started joins it in flight.
	joiner := fx.passPull("a2", time.Now().Add(-time.Hour))
	waitFor(t, "the second pass to join", func() bool { return activities.PassPullStats(fx.acts).Joined == 1 })
	cancel()
	require.ErrorIs(t, <-leader, context.Canceled)
	release <- struct{}{}
	r := <-joiner
	require.NoError(t, r.err, "the pull ended with the pass that started it")
	require.Equal(t, 1, r.res.Inserted)
	require.Equal(t, 1, fx.feed.requests())
}

func TestPassPullOutcomesAreCountedOnTheWorkersMetrics(t *testing.T) {
	fx := newFixture(t)
	reg := prometheus.NewRegistry()
	h, err := metrics.NewHandler(reg, metrics.Options{})
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(h)
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(fx.acts)
	scheduled := time.Now().Round(0)
	for range 2 { // the second is covered by the first
		_, err := env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant, ActionID: "a", FreshAsOf: scheduled})
		require.NoError(t, err)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != activities.MetricPassPulls {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	require.Equal(t, map[string]float64{activities.PullPulled: 1, activities.PullSkipped: 1}, got)
}

func TestPassPullBurstScheduledAtOnceCostsOnePull(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	// 32 verifications of the tenant scheduled their passes at the same
	// moment: whichever pull starts first started after all of them, so it
	// covers them all, whether they join it in flight or arrive after.
	scheduled := time.Now()
	var answers []<-chan extracted
	for i := range 32 {
		answers = append(answers, fx.passPull("a"+strconv.Itoa(i), scheduled))
	}
	for _, a := range answers {
		got := <-a
		require.NoError(t, got.err)
		require.Empty(t, got.res.Unreachable)
	}
	require.Equal(t, 1, fx.feed.requests())
	s := activities.PassPullStats(fx.acts)
	require.Equal(t, int64(1), s.Pulled)
	require.Equal(t, int64(31), s.Joined+s.Skipped)
}
