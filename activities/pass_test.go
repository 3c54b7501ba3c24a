package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/postgres"
)

func (fx *fixture) pass(t *testing.T, in activities.PassInput) (activities.PassResult, error) {
	t.Helper()
	val, err := fx.env.ExecuteActivity(fx.acts.Pass, in)
	if err != nil {
		return activities.PassResult{}, err
	}
	var res activities.PassResult
	require.NoError(t, val.Get(&res))
	return res, nil
}

// TestPassPullsThenEvaluates: the production pass pulls the connectors
// first and evaluates on what that pull stored, in one activity; the
// stored verdict's pass latency counts the pull.
func TestPassPullsThenEvaluates(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})

	res, err := fx.pass(t, activities.PassInput{Pull: true,
		Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: id},
		Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
	require.NoError(t, err)
	require.True(t, res.Pulled)
	require.Empty(t, res.Unreachable)
	require.Equal(t, 1, fx.feed.pulls)
	require.Equal(t, commitlayer.StatusPass, res.Evaluate.Verdict.Status, "the evaluation saw the facts the same pass pulled: %+v", res.Evaluate.Verdict.Findings)
	require.True(t, res.Evaluate.Changed)
	stored, err := fx.db.LatestVerdict(context.Background(), fx.tenant, id)
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusPass, stored.Status)
	require.Positive(t, stored.PassLatency)
}

// TestPassWithoutPullOnlyEvaluates: a pass not asked to pull reads no
// connector, and evaluates on what is stored (here nothing yet).
func TestPassWithoutPullOnlyEvaluates(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})

	res, err := fx.pass(t, activities.PassInput{Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
	require.NoError(t, err)
	require.False(t, res.Pulled)
	require.Zero(t, fx.feed.pulls, "no pull")
	require.NotEqual(t, commitlayer.StatusPass, res.Evaluate.Verdict.Status, "the payout was never pulled")
}

// TestPassHandsUnreachableSourcesToTheEvaluation: a source the pull could
// not read is reported by the pass and counts as not connected in its
// verdict, which therefore cannot pass.
func TestPassHandsUnreachableSourcesToTheEvaluation(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.down = true
	res, err := fx.pass(t, activities.PassInput{Pull: true,
		Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: id},
		Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
	require.NoError(t, err)
	require.True(t, res.Pulled)
	require.Contains(t, res.Unreachable, "ledger")
	require.Equal(t, commitlayer.StatusUnknown, res.Evaluate.Verdict.Status, "%+v", res.Evaluate.Verdict)
}

// TestPassErrorsStayAsTheyAre: bad input to either step fails the pass for
// good (non-retryable, with the step's type); the evaluation of a pass
// whose pull failed never runs.
func TestPassErrorsStayAsTheyAre(t *testing.T) {
	fx := newFixture(t)
	id := fx.action(t, "bot", "account:acc_1", 500, fx.now.Add(-20*time.Minute))
	for name, in := range map[string]activities.PassInput{
		"pull without tenant": {Pull: true, Extract: activities.ExtractInput{}, Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}},
		"evaluate no action":  {Evaluate: activities.EvaluateInput{TenantID: fx.tenant}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fx.pass(t, in)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.True(t, appErr.NonRetryable(), "%v", err)
			require.Equal(t, activities.ErrInvalidInput, appErr.Type())
		})
	}
	_, err := fx.db.LatestVerdict(context.Background(), fx.tenant, id)
	require.ErrorIs(t, err, commitlayer.ErrNotFound, "no pass stored a verdict")
}

// actionReadStore signals each GetAction.
type actionReadStore struct {
	activities.Store
	read chan struct{}
}

func (s *actionReadStore) GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error) {
	s.read <- struct{}{}
	return s.Store.GetAction(ctx, tenantID, actionID)
}

// TestPassReadsItsActionBesideThePull: a pass that pulls reads its action
// while the connectors' feeds answer (the pull changes no action), once,
// and evaluates on what the pull stored; a pass for an action the store
// does not have still pulls and then fails, retryably, as Evaluate does.
func TestPassReadsItsActionBesideThePull(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})
	store := &actionReadStore{Store: fx.db, read: make(chan struct{}, 4)}
	fx.acts.Store = store
	arrived, release := fx.feed.holdRequests(t)

	done := make(chan passed, 1)
	go func() {
		res, err := fx.acts.Pass(context.Background(), activities.PassInput{Pull: true,
			Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: id},
			Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: id}})
		done <- passed{res, err}
	}()
	awaitRequest(t, arrived)
	awaitRequest(t, store.read) // read while the feed holds its answer
	release <- struct{}{}
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, commitlayer.StatusPass, got.res.Evaluate.Verdict.Status)
	require.Equal(t, 1, got.res.Evaluate.Verdict.Version)
	require.Empty(t, store.read, "the action was read twice")

	release <- struct{}{}
	_, err := fx.acts.Pass(context.Background(), activities.PassInput{Pull: true,
		Extract:  activities.ExtractInput{TenantID: fx.tenant, ActionID: "act_missing"},
		Evaluate: activities.EvaluateInput{TenantID: fx.tenant, ActionID: "act_missing"}})
	require.ErrorContains(t, err, "not found")
	var appErr *temporal.ApplicationError
	require.False(t, errors.As(err, &appErr) && appErr.NonRetryable(), "a missing action is retried")
	require.Equal(t, 2, fx.feed.requests(), "the second pass pulled")
}

// readPassStore signals each ReadPass of the postgres store, which it is
// (a passReader: Pass's reads go through it).
type readPassStore struct {
	*postgres.DB
	reads chan struct{}
}

func (s *readPassStore) ReadPass(ctx context.Context, tenantID string, r commitlayer.PassReadRequest) (commitlayer.PassRead, error) {
	s.reads <- struct{}{}
	return s.DB.ReadPass(ctx, tenantID, r)
}

func (fx *fixture) readPasses() *readPassStore {
	s := &readPassStore{DB: fx.db, reads: make(chan struct{}, 16)}
	fx.acts.Store = s
	return s
}

// passAsync runs a pass in the background.
func (fx *fixture) passAsync(in activities.PassInput) <-chan passed {
	done := make(chan passed, 1)
	go func() {
		res, err := fx.acts.Pass(context.Background(), in)
		done <- passed{res, err}
	}()
	return done
}

type passed struct {
	res activities.PassResult
	err error
}

func awaitPass(t *testing.T, done <-chan passed) passed {
	t.Helper()
	select {
	case p := <-done:
		require.NoError(t, p.err)
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("gave up waiting for a pass")
		return passed{}
	}
}

func rePass(tenant, id string, known int, fresh time.Time) activities.PassInput {
	return activities.PassInput{Pull: true,
		Extract:  activities.ExtractInput{TenantID: tenant, ActionID: id, FreshAsOf: fresh},
		Evaluate: activities.EvaluateInput{TenantID: tenant, ActionID: id, Known: known}}
}

// TestPassReadsBesideAQuietPull: a re-read (the verification holds a
// verdict) reads the facts while the feeds answer, and when the pull
// brings nothing new that read is the pass's only one.
func TestPassReadsBesideAQuietPull(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "own pull", true: "shared pull"}[shared], func(t *testing.T) {
			fx := newFixture(t)
			at := fx.now.Add(-20 * time.Minute)
			id := fx.action(t, "bot", "account:acc_1", 500, at)
			fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
			fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})
			first, err := fx.pass(t, rePass(fx.tenant, id, 0, time.Time{}))
			require.NoError(t, err)
			require.Equal(t, commitlayer.StatusPass, first.Evaluate.Verdict.Status)

			store := fx.readPasses()
			arrived, release := fx.feed.holdRequests(t)
			fresh := time.Time{}
			if shared {
				fresh = time.Now().Round(0)
			}
			done := fx.passAsync(rePass(fx.tenant, id, first.Evaluate.Verdict.Version, fresh))
			awaitRequest(t, arrived)
			awaitRequest(t, store.reads) // read while the feed holds its answer
			release <- struct{}{}
			got := awaitPass(t, done)
			require.Equal(t, commitlayer.StatusPass, got.res.Evaluate.Verdict.Status)
			require.False(t, got.res.Evaluate.Changed)
			require.Empty(t, store.reads, "the pass read again after a pull that stored nothing")
		})
	}
}

// TestPassReadsAgainAfterAPullThatStored: a re-read whose pull stores a new
// fact evaluates on a read made after it, not on the one made beside it.
func TestPassReadsAgainAfterAPullThatStored(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
	first, err := fx.pass(t, rePass(fx.tenant, id, 0, time.Time{}))
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusFail, first.Evaluate.Verdict.Status, "no payout yet: %+v", first.Evaluate.Verdict)

	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})
	store := fx.readPasses()
	arrived, release := fx.feed.holdRequests(t)
	done := fx.passAsync(rePass(fx.tenant, id, first.Evaluate.Verdict.Version, time.Time{}))
	awaitRequest(t, arrived)
	awaitRequest(t, store.reads) // the read beside the pull, before the payout is stored
	release <- struct{}{}
	got := awaitPass(t, done)
	require.Equal(t, commitlayer.StatusPass, got.res.Evaluate.Verdict.Status, "%+v", got.res.Evaluate.Verdict.Findings)
	require.True(t, got.res.Evaluate.Changed)
	require.Len(t, store.reads, 1, "read again after the pull")
}

// TestFirstPassReadsOnlyAfterItsPull: a verification's first pass (no
// verdict known) does not read beside its pull, which most often brings
// what it evaluates.
func TestFirstPassReadsOnlyAfterItsPull(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})
	store := fx.readPasses()
	got, err := fx.pass(t, rePass(fx.tenant, id, 0, time.Time{}))
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusPass, got.Evaluate.Verdict.Status)
	require.Len(t, store.reads, 1, "one read, after the pull")
}

// TestQueuedPassReadsAfterItsPullLists: a pass that joins the pull queued
// behind one in flight reads beside the queued pull, never before it
// starts: the pull in flight stores a fact about the pass's subject, the
// queued one finds nothing new, and the pass's verdict counts the fact.
func TestQueuedPassReadsAfterItsPullLists(t *testing.T) {
	fx := newFixture(t)
	at := fx.now.Add(-20 * time.Minute)
	other := fx.action(t, "bot", "account:acc_2", 500, at)
	id := fx.action(t, "bot", "account:acc_1", 500, at)
	fx.feed.add("account_opened", "account:acc_1", at.Add(-time.Hour), map[string]any{"status": "active"})
	first, err := fx.pass(t, rePass(fx.tenant, id, 0, time.Time{}))
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusFail, first.Evaluate.Verdict.Status)
	fx.feed.add("payout_sent", "account:acc_1", at.Add(time.Minute), map[string]any{"payout_id": "p1", "amount": 500})

	store := fx.readPasses()
	arrived, release := fx.feed.holdRequests(t)
	inFlight := fx.passAsync(rePass(fx.tenant, other, 1, time.Now().Round(0)))
	awaitRequest(t, arrived)     // its pull is at the feed, about to bring the payout
	awaitRequest(t, store.reads) // and its read beside it is made
	queued := fx.passAsync(rePass(fx.tenant, id, first.Evaluate.Verdict.Version, time.Now().Round(0)))
	waitFor(t, "the second pass to queue", func() bool {
		s := activities.PassPullStats(fx.acts)
		return s.Pulled == 2
	})
	require.Empty(t, store.reads, "the queued pass read before its pull listed the connectors")
	release <- struct{}{} // the pull in flight stores the payout
	awaitPass(t, inFlight)
	awaitRequest(t, arrived) // the queued pull: nothing new
	release <- struct{}{}
	got := awaitPass(t, queued)
	require.Equal(t, commitlayer.StatusPass, got.res.Evaluate.Verdict.Status, "%+v", got.res.Evaluate.Verdict.Findings)
}
