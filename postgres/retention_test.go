package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

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
	n, err := db.purgeTenantFacts(ctx, tn.ID, retention, now)
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
	n, err = db.purgeTenantFacts(ctx, tn.ID, retention, later)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	require.Equal(t, []string{"o3b"}, storedIDs(t, db, tn.ID))
	n, err = db.purgeTenantFacts(ctx, tn.ID, retention, later)
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
	n, err := db.purgeTenantFacts(ctx, tn.ID, retention, now)
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
