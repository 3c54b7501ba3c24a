package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// sliceFacts yields facts for BulkLoadFacts.
func sliceFacts(facts []commitlayer.Fact) func() (commitlayer.Fact, bool, error) {
	i := 0
	return func() (commitlayer.Fact, bool, error) {
		if i == len(facts) {
			return commitlayer.Fact{}, false, nil
		}
		i++
		return facts[i-1], true, nil
	}
}

func TestBulkLoadFacts(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	var facts []commitlayer.Fact
	for i := range 500 {
		facts = append(facts, mkFact("ledger", "entry", fmt.Sprintf("account:a%d", i%50), fmt.Sprintf("e%d", i),
			t0.Add(time.Duration(i)*time.Second), commitlayer.Attrs{"amount": int64(i)}, commitlayer.Subject(fmt.Sprintf("customer:c%d", i%50))))
	}
	n, err := db.BulkLoadFacts(ctx, tn.ID, sliceFacts(facts))
	require.NoError(t, err)
	require.EqualValues(t, 500, n)

	// Read back as a pass reads them: the links and attrs survive COPY.
	got, err := db.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"customer:c7"})
	require.NoError(t, err)
	require.Len(t, got, 10)
	require.Equal(t, commitlayer.Subject("account:a7"), got[0].Subject)
	require.Equal(t, int64(7), got[0].Attrs["amount"])
	require.Equal(t, []commitlayer.Subject{"customer:c7"}, got[0].Links)
	sources, err := db.ConnectedSources(ctx, tn.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"ledger"}, sources)

	// The same facts again: a conflict, nothing stored.
	_, err = db.BulkLoadFacts(ctx, tn.ID, sliceFacts(facts[:3]))
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	// An invalid fact fails the load, naming it; the valid ones before it are not kept.
	bad := []commitlayer.Fact{mkFact("ledger", "entry", "account:z", "z1", t0, nil), mkFact("ledger", "entry", "no subject", "z2", t0, nil)}
	_, err = db.BulkLoadFacts(ctx, tn.ID, sliceFacts(bad))
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
	require.ErrorContains(t, err, "facts[1]")
	size, err := db.FactStoreSize(ctx, tn.ID)
	require.NoError(t, err)
	require.EqualValues(t, 500, size.Facts)
	require.Positive(t, size.TableBytes)
	require.Positive(t, size.IndexBytes)
	require.Contains(t, size.Indexes, "facts_link_keys")
	// An unknown tenant is not found.
	_, err = db.BulkLoadFacts(ctx, "t_nobody", sliceFacts(facts[:1]))
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

func TestPurgeFactsKeepsWhatWatchingVerificationsNeed(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	other := newTenant(t)
	now := t0.Add(100 * 24 * time.Hour)
	old := t0 // 100 days before now
	const retention = 30 * 24 * time.Hour
	facts := []commitlayer.Fact{
		// The watched order: its old state, its customer's old fact (one
		// hop), that customer's other account (two hops: through the
		// customer), and an old ticket linking the order.
		mkFact("orders", "order_created", "order:watched", "o1", old, nil, "customer:c1"),
		mkFact("crm", "customer_created", "customer:c1", "c1", old, nil, "account:acc1"),
		mkFact("ledger", "account_opened", "account:acc1", "a1", old, nil),
		mkFact("tickets", "ticket_opened", "ticket:t1", "t1", old, nil, "order:watched"),
		// Old facts on subjects no open verification reads: dropped.
		mkFact("orders", "order_created", "order:done", "o2", old, nil, "customer:c2"),
		mkFact("crm", "customer_created", "customer:c2", "c2", old, nil),
		mkFact("orders", "order_created", "order:stray", "o3", old, nil),
		// Recent facts: kept whatever their subject.
		mkFact("orders", "order_status_changed", "order:stray", "o3b", now.Add(-time.Hour), nil),
	}
	_, err := db.InsertFacts(ctx, tn.ID, facts)
	require.NoError(t, err)
	_, err = db.InsertFacts(ctx, other.ID, facts[4:7]) // another tenant, nothing watched
	require.NoError(t, err)

	// order:watched is still watched; order:done's watch ended (and its
	// verification ran), and its verdict history must stay.
	watched := mkAction("act_w", "order:watched", now.Add(-time.Hour))
	_, _, err = db.CreateAction(ctx, tn.ID, watched, now, now.Add(72*time.Hour), "", nil)
	require.NoError(t, err)
	require.NoError(t, db.VerificationStarted(ctx, tn.ID, "act_w"))
	done := mkAction("act_d", "order:done", old)
	_, _, err = db.CreateAction(ctx, tn.ID, done, old, old.Add(72*time.Hour), "", nil)
	require.NoError(t, err)
	require.NoError(t, db.VerificationStarted(ctx, tn.ID, "act_d"))
	_, _, err = db.AppendVerdict(ctx, tn.ID, mkVerdict("act_d", commitlayer.StatusPass, old))
	require.NoError(t, err)

	_, err = db.PurgeFacts(ctx, 0, now)
	require.Error(t, err)
	_, err = db.PurgeTenantFacts(ctx, tn.ID, -time.Hour, now)
	require.Error(t, err)
	n, err := db.PurgeTenantFacts(ctx, tn.ID, retention, now)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	// Every tenant's (the shared test store's other tenants too: they keep
	// what their own open verifications need).
	res, err := db.PurgeFacts(ctx, retention, now)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Deleted, int64(3))
	require.GreaterOrEqual(t, res.Tenants, 1)

	left := storedIDs(t, db, tn.ID)
	require.Equal(t, []string{"a1", "c1", "o1", "o3b", "t1"}, left)
	require.Empty(t, storedIDs(t, db, other.ID))
	vs, err := db.VerdictHistory(ctx, tn.ID, "act_d")
	require.NoError(t, err)
	require.Len(t, vs, 1)
	sources, err := db.ConnectedSources(ctx, other.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"crm", "orders"}, sources, "a purged source stays connected")

	// Once its watch is over, the watched order's old facts go too; a
	// second pass finds nothing more.
	later := now.Add(73 * time.Hour)
	n, err = db.PurgeTenantFacts(ctx, tn.ID, retention, later)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	require.Equal(t, []string{"o3b"}, storedIDs(t, db, tn.ID))
	n, err = db.PurgeTenantFacts(ctx, tn.ID, retention, later)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestPurgeFactsKeepsTheWindowOfAnUnstartedVerification(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	now := t0.Add(100 * 24 * time.Hour)
	const retention = 24 * time.Hour
	// An action recorded 60 days late (a backfill) whose verification has not
	// started: the facts within retention before its request stay, on any
	// subject (its limits read other subjects' effects).
	_, err := db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:other", "r1", t0.Add(40*24*time.Hour-time.Hour), nil),
		mkFact("payments", "refund_created", "order:other", "r0", t0.Add(10*24*time.Hour), nil),
	})
	require.NoError(t, err)
	late := mkAction("act_late", "order:late", t0.Add(40*24*time.Hour))
	_, _, err = db.CreateAction(ctx, tn.ID, late, late.RequestedAt, late.RequestedAt, "", nil)
	require.NoError(t, err)
	n, err := db.PurgeTenantFacts(ctx, tn.ID, retention, now)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, []string{"r1"}, storedIDs(t, db, tn.ID))
}

func storedIDs(t *testing.T, db *DB, tenantID string) []string {
	t.Helper()
	rows, err := db.Pool().Query(context.Background(), `SELECT external_id FROM facts WHERE tenant_id = $1`, tenantID)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	slices.Sort(out)
	return out
}

// Link lookups never read a GIN pending list (migration 0012).
func TestFactLinkKeysHasNoPendingList(t *testing.T) {
	db := testStore(t)
	var opts []string
	require.NoError(t, db.Pool().QueryRow(context.Background(),
		`SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = 'facts_link_keys'`).Scan(&opts))
	require.Contains(t, opts, "fastupdate=off")
}

func TestExplainPassQueries(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, err := db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("orders", "order_created", "order:o1", "o1", t0, nil, "customer:c1")})
	require.NoError(t, err)
	plans, err := db.ExplainPassQueries(ctx, tn.ID, "order:o1", "refund_customer", t0)
	require.NoError(t, err)
	var names []string
	for _, p := range plans {
		names = append(names, p.Name)
		require.Contains(t, p.Plan, "Execution Time")
	}
	require.Equal(t, []string{"FactsAbout", "LinkedSubjects", "WatchedActions", "PriorActions"}, names)
}
