package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// TestOutboxDeliversUntilDelivered: a notice written with its facts (their
// digest with it) is due at once, kept with backoff while delivery fails,
// deleted once delivered; a batch of duplicates writes none. Its insert
// wakes a listener.
func TestOutboxDeliversUntilDelivered(t *testing.T) {
	testDB := testStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tn := newTenant(t)
	woken := make(chan struct{}, 16)
	go testDB.Listen(ctx, func() { woken <- struct{}{} }, slog.Default())
	<-woken // listening: a listener's first wake comes once it listens

	_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("payments", "refund_created", "order:o1", "ob-1", t0, nil)})
	require.NoError(t, err)
	select {
	case <-woken:
	case <-time.After(30 * time.Second):
		t.Fatal("the notice's insert woke no listener")
	}
	_, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("payments", "refund_created", "order:o1", "ob-1", t0, nil)})
	require.NoError(t, err)
	ns := notices(t, testDB, tn.ID)
	require.Len(t, ns, 1, "a batch of duplicates tells nobody")
	id := ns[0].ID

	mine := func(n Notice) bool { return n.TenantID == tn.ID }
	deliver := func(fail error, seen *[]Notice) func(context.Context, Notice) error {
		return func(_ context.Context, n Notice) error {
			if !mine(n) {
				return nil // another test's notice: delivered, as a reconciler would
			}
			*seen = append(*seen, n)
			return fail
		}
	}
	var seen []Notice
	_, failed, err := testDB.DeliverNotifications(ctx, 100, deliver(errors.New("temporal down"), &seen))
	require.NoError(t, err)
	require.GreaterOrEqual(t, failed, 1)
	require.Len(t, seen, 1, "due at once")
	require.Equal(t, []commitlayer.Subject{"order:o1"}, seen[0].Subjects)
	require.Equal(t, &contracts.Digest{Kinds: []contracts.KindSince{{FactType: commitlayer.FactType{Source: "payments", Type: "refund_created"}, Earliest: t0}}}, seen[0].Digest)
	var attempts int
	var next time.Time
	var lastErr string
	require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT attempts, next_attempt_at, last_error FROM fact_notifications WHERE id = $1`,
		id).Scan(&attempts, &next, &lastErr))
	require.Equal(t, 1, attempts)
	require.True(t, next.After(time.Now()), "backed off")
	require.Equal(t, "temporal down", lastErr)

	_, err = testDB.Pool().Exec(ctx, `UPDATE fact_notifications SET next_attempt_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	seen = nil
	_, _, err = testDB.DeliverNotifications(ctx, 100, deliver(nil, &seen))
	require.NoError(t, err)
	require.Len(t, seen, 1)
	require.Empty(t, notices(t, testDB, tn.ID), "delivered: deleted")
}

// TestPendingStarts: an action is pending until its verification is marked
// started, and only once it is older than asked.
func TestPendingStarts(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	rec, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_pending", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)
	has := func(older time.Duration) bool {
		recs, err := testDB.PendingStarts(ctx, older, 1000)
		require.NoError(t, err)
		for _, r := range recs {
			if r.TenantID == tn.ID && r.ID == rec.ID {
				return true
			}
		}
		return false
	}
	require.True(t, has(0))
	require.False(t, has(time.Hour), "too new")
	require.NoError(t, testDB.VerificationStarted(ctx, tn.ID, rec.ID))
	require.False(t, has(0))
	id, err := testDB.Identity(ctx)
	require.NoError(t, err)
	require.Len(t, id, 32)
}

// TestOutboxRoundStopsAtTheFirstFailure: with Temporal away, one failed
// delivery ends the round; the rest stay due, untouched.
func TestOutboxRoundStopsAtTheFirstFailure(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	for i := range 3 {
		_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("payments", "refund_created", "order:o1",
			"stop-"+string(rune('a'+i)), t0, nil)})
		require.NoError(t, err)
	}
	calls := 0
	_, failed, err := testDB.DeliverNotifications(ctx, 100, func(_ context.Context, n Notice) error {
		if n.TenantID != tn.ID {
			return nil
		}
		calls++
		return errors.New("temporal down")
	})
	require.NoError(t, err)
	require.Equal(t, 1, failed)
	require.Equal(t, 1, calls, "the round stopped at the first failure")
	var untouched int
	require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_notifications WHERE tenant_id = $1 AND attempts = 0`,
		tn.ID).Scan(&untouched))
	require.Equal(t, 2, untouched)
}

// TestPendingStartsFairWithOwnBackoff: the pending starts alternate between
// tenants (each one's oldest first), a deferred start waits its own backoff
// while the others stay due, and a start marked failed leaves the queue for
// good, with its reason on the action.
func TestPendingStartsFairWithOwnBackoff(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	a, b := newTenant(t), newTenant(t)
	mine := map[string]bool{a.ID: true, b.ID: true}
	for i, tn := range []commitlayer.Tenant{a, a, a, b} {
		_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction(fmt.Sprintf("act_fair_%d", i), "order:o1", t0), t0, t0, "", nil)
		require.NoError(t, err)
	}
	order := func() []string {
		recs, err := testDB.PendingStarts(ctx, 0, 1000)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			if mine[r.TenantID] {
				out = append(out, r.ID)
			}
		}
		return out
	}
	require.Equal(t, []string{"act_fair_0", "act_fair_3", "act_fair_1", "act_fair_2"}, order(),
		"each tenant's oldest first: b's one start is not behind a's three")

	attempts, err := testDB.StartDeferred(ctx, a.ID, "act_fair_0", time.Minute, "temporal unavailable")
	require.NoError(t, err)
	require.Equal(t, 1, attempts)
	require.Equal(t, []string{"act_fair_1", "act_fair_3", "act_fair_2"}, order(), "a deferred start waits its own backoff; the others stay due")

	marked, err := testDB.StartFailed(ctx, b.ID, "act_fair_3", "Temporal refused the verification's start: too long")
	require.NoError(t, err)
	require.True(t, marked)
	marked, err = testDB.StartFailed(ctx, b.ID, "act_fair_3", "again")
	require.NoError(t, err)
	require.False(t, marked, "marked once")
	require.Equal(t, []string{"act_fair_1", "act_fair_2"}, order(), "a failed start leaves the queue")
	rec, err := testDB.GetAction(ctx, b.ID, "act_fair_3")
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationFailed, rec.Verification())
	require.Equal(t, "Temporal refused the verification's start: too long", rec.VerificationError)

	require.NoError(t, testDB.VerificationStarted(ctx, a.ID, "act_fair_1"))
	rec, err = testDB.GetAction(ctx, a.ID, "act_fair_1")
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationStarted, rec.Verification())
	rec, err = testDB.GetAction(ctx, a.ID, "act_fair_2")
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationPending, rec.Verification())
}
