package postgres

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestCreateTenant(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn, key, err := testDB.CreateTenant(ctx, "  Acme  ")
	require.NoError(t, err)
	require.Equal(t, "Acme", tn.Name)
	require.Regexp(t, `^t_[a-z2-7]{16}$`, tn.ID)
	require.Regexp(t, `^cl_[a-z2-7]{8}_[a-z2-7]{52}$`, key)
	require.Equal(t, tn.ID[2:10], key[3:11], "key carries the tenant id prefix")
	require.False(t, tn.CreatedAt.IsZero())

	got, err := testDB.TenantByAPIKey(ctx, key)
	require.NoError(t, err)
	require.Equal(t, tn, got)

	// Only the hash is stored.
	var stored []byte
	require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT api_key_hash FROM tenants WHERE id = $1`, tn.ID).Scan(&stored))
	sum := sha256.Sum256([]byte(key))
	require.Equal(t, sum[:], stored)
	var n int
	require.NoError(t, testDB.Pool().QueryRow(ctx,
		`SELECT count(*) FROM tenants WHERE id = $1 AND position($2::bytea in api_key_hash) > 0`, tn.ID, []byte(key)).Scan(&n))
	require.Zero(t, n)

	// A second tenant gets other ids and keys.
	tn2, key2, err := testDB.CreateTenant(ctx, "Acme")
	require.NoError(t, err)
	require.NotEqual(t, tn.ID, tn2.ID)
	require.NotEqual(t, key, key2)

	all, err := testDB.ListTenants(ctx)
	require.NoError(t, err)
	var ids []string
	for _, x := range all {
		ids = append(ids, x.ID)
	}
	require.Contains(t, ids, tn.ID)
	require.Contains(t, ids, tn2.ID)
}

func TestCreateTenantBadInput(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	for _, name := range []string{"", "   ", "\t\n", "nul\x00byte"} {
		_, key, err := testDB.CreateTenant(ctx, name)
		require.ErrorIs(t, err, commitlayer.ErrInvalid, "%q", name)
		require.Empty(t, key)
	}
}

func TestTenantByAPIKeyUnknown(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	_, key, err := testDB.CreateTenant(ctx, "k")
	require.NoError(t, err)
	for _, k := range []string{"", "cl_", key[:len(key)-1], key + "a", "Bearer " + key, "x" + key[1:], "cl_\x00"} {
		_, err := testDB.TenantByAPIKey(ctx, k)
		require.ErrorIs(t, err, commitlayer.ErrNotFound, "%q", k)
	}
}

// TestDeleteTenantPurgesAll fills every tenant-owned table for two tenants,
// deletes one, and checks that no row of it is left anywhere while the
// other keeps all of its rows.
func TestDeleteTenantPurgesAll(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	a, b := newTenant(t), newTenant(t)
	fillTenant(t, a.ID)
	fillTenant(t, b.ID)
	before := rowCounts(t, b.ID)
	for table, n := range before {
		require.Positive(t, n, table)
	}

	require.NoError(t, testDB.DeleteTenant(ctx, a.ID))
	for table, n := range rowCounts(t, a.ID) {
		require.Zero(t, n, "%s still holds rows of the deleted tenant", table)
	}
	require.Equal(t, before, rowCounts(t, b.ID))
	_, err := testDB.GetAction(ctx, a.ID, "act_fill")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)

	require.ErrorIs(t, testDB.DeleteTenant(ctx, a.ID), commitlayer.ErrNotFound)
	require.ErrorIs(t, testDB.DeleteTenant(ctx, "t_nope"), commitlayer.ErrNotFound)
}

// tenantTables lists every table holding tenant rows; TestEveryTableIsListed
// keeps it honest.
var tenantTables = []string{"tenants", "contracts", "facts", "source_coverage", "actions", "verdicts", "connectors", "fact_notifications",
	"webhooks", "webhook_deliveries", "console_sessions", "span_rejections", "action_attempts"}

func TestEveryTableIsListed(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	rows, err := testDB.Pool().Query(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = 'public' AND column_name = 'tenant_id'`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		got = append(got, n)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, tenantTables[1:], got)
}

func rowCounts(t *testing.T, tenantID string) map[string]int {
	testDB := testStore(t)
	t.Helper()
	out := map[string]int{}
	for _, table := range tenantTables {
		col := "tenant_id"
		if table == "tenants" {
			col = "id"
		}
		var n int
		require.NoError(t, testDB.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, tenantID).Scan(&n))
		out[table] = n
	}
	return out
}

// fillTenant writes at least one row of every kind for the tenant.
func fillTenant(t *testing.T, tenantID string) {
	testDB := testStore(t)
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	_, _, err := testDB.PutContract(ctx, tenantID, "refund_customer", []byte("id: refund_customer\n"))
	require.NoError(t, err)
	_, err = testDB.InsertFacts(ctx, tenantID, []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o1", "re_1", at, commitlayer.Attrs{"amount": int64(2500)}),
	})
	require.NoError(t, err)
	_, _, err = testDB.CreateAction(ctx, tenantID, mkAction("act_fill", "order:o1", at), at.Add(time.Minute), at.Add(time.Hour), "k1", []byte("h"))
	require.NoError(t, err)
	_, _, err = testDB.AppendVerdict(ctx, tenantID, mkVerdict("act_fill", commitlayer.StatusPass, at))
	require.NoError(t, err)
	_, _, err = testDB.RecordAttempt(ctx, tenantID, "act_fill", "k2", commitlayer.Claim{Status: commitlayer.ClaimSuccess}, []byte(`{}`), at, []byte("a"))
	require.NoError(t, err)
	_, err = testDB.CreateConnector(ctx, tenantID, commitlayer.Connector{Source: "orders", Kind: "http_events", URL: "http://x/orders"})
	require.NoError(t, err)
	_, err = testDB.CreateWebhook(ctx, tenantID, commitlayer.Webhook{ID: "wh_fill", URL: "https://hooks.example.com/x",
		Events: []string{"verdict.final"}, Secret: "sealed"})
	require.NoError(t, err)
	_, err = testDB.PlanDeliveries(ctx, tenantID, commitlayer.WebhookDelivery{EventID: "evt_fill", EventType: "verdict.final", ActionID: "act_fill", Sequence: 1})
	require.NoError(t, err)
	now := time.Now()
	require.NoError(t, testDB.CreateSession(ctx, tenantID, randomToken(32), now, now.Add(time.Hour), now.Add(time.Hour), 10))
	require.NoError(t, testDB.RecordSpanRejections(ctx, tenantID, []commitlayer.SpanRejection{{At: at, Message: "m"}}))
}

// facts has no foreign key to tenants (migration 0013): insertFacts locks
// the tenant once per batch, and a trigger on tenants deletes the facts.
// The next three tests hold that up against a tenant delete racing a batch,
// in both orders, and against TRUNCATE.

// TestBatchWaitsForTenantDelete deletes a tenant in a transaction left
// open, runs a batch against it, and commits the delete once the batch
// waits for it: the batch fails with ErrNotFound and stores nothing.
func TestBatchWaitsForTenantDelete(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	del, err := testDB.Pool().Begin(ctx)
	require.NoError(t, err)
	defer del.Rollback(ctx) //nolint:errcheck // no-op after Commit
	_, err = del.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, tn.ID)
	require.NoError(t, err)

	pid := make(chan uint32, 1)
	done := make(chan error, 1)
	go func() {
		done <- testDB.inTx(ctx, func(tx pgx.Tx) error {
			pid <- tx.Conn().PgConn().PID()
			rows, err := encodeFacts([]commitlayer.Fact{mkFact("payments", "refund_created", "order:o1", "re_1", t0, nil)}, 0)
			if err != nil {
				return err
			}
			_, err = testDB.insertFacts(ctx, tx, tn.ID, rows)
			return err
		})
	}()
	waitBlocked(t, <-pid, done)
	require.NoError(t, del.Commit(ctx))
	require.ErrorIs(t, classify(<-done), commitlayer.ErrNotFound)
	require.Zero(t, rowCounts(t, tn.ID)["facts"])
}

// TestTenantDeleteWaitsForBatch stores a batch in a transaction left open,
// deletes its tenant, and commits the batch once the delete waits for it:
// the delete removes the facts the batch committed.
func TestTenantDeleteWaitsForBatch(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	batch, err := testDB.Pool().Begin(ctx)
	require.NoError(t, err)
	defer batch.Rollback(ctx) //nolint:errcheck // no-op after Commit
	rows, err := encodeFacts([]commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o1", "re_1", t0, nil),
		mkFact("payments", "refund_created", "order:o2", "re_2", t0, nil, "customer:c1"),
	}, 0)
	require.NoError(t, err)
	res, err := testDB.insertFacts(ctx, batch, tn.ID, rows)
	require.NoError(t, err)
	require.Equal(t, 2, res.Inserted)

	conn, err := testDB.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, tn.ID)
		done <- err
	}()
	waitBlocked(t, conn.Conn().PgConn().PID(), done)
	require.NoError(t, batch.Commit(ctx))
	require.NoError(t, <-done)
	require.Zero(t, rowCounts(t, tn.ID)["facts"], "facts of a deleted tenant")
}

// waitBlocked returns once the backend pid waits for a lock. The statement
// it runs must wait; if it finishes first, done says how, and the test
// fails.
func waitBlocked(t *testing.T, pid uint32, done chan error) {
	t.Helper()
	testDB := testStore(t)
	for range 1000 {
		var wait *string
		require.NoError(t, testDB.Pool().QueryRow(context.Background(),
			`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, int64(pid)).Scan(&wait))
		if wait != nil && *wait == "Lock" {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("finished without waiting for the other transaction (err %v)", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("backend never waited for the other transaction")
}

// TestTruncateTenantsEmptiesFacts truncates tenants (in a database of its
// own) and finds no fact left.
func TestTruncateTenantsEmptiesFacts(t *testing.T) {
	testURL := testDatabaseURL(t)
	ctx := context.Background()
	url := replaceDBName(t, testURL, dbName(t, testURL)+"_trunc")
	require.NoError(t, CreateDatabaseIfMissing(ctx, url))
	t.Cleanup(func() { dropDatabase(context.Background(), url) })
	db, err := Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.Migrate(ctx))
	tn, _, err := db.CreateTenant(ctx, "truncated")
	require.NoError(t, err)
	_, err = db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("payments", "refund_created", "order:o1", "re_1", t0, nil)})
	require.NoError(t, err)
	_, err = db.Pool().Exec(ctx, `TRUNCATE tenants CASCADE`)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.Pool().QueryRow(ctx, `SELECT count(*) FROM facts`).Scan(&n))
	require.Zero(t, n)
}
