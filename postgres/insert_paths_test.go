package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// coverageCount is the fact count source coverage holds for a source.
func coverageCount(t *testing.T, db *DB, tenantID, source string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Pool().QueryRow(context.Background(),
		`SELECT fact_count FROM source_coverage WHERE tenant_id = $1 AND source = $2`, tenantID, source).Scan(&n))
	return n
}

// TestInsertFactsMeetingAStoredFact: a batch of new facts goes by COPY
// into facts; one that holds a stored fact (last, so the first attempt
// inserted the rest before it failed) is stored again, staged, with ON
// CONFLICT, the stored fact kept as it was, nothing of the failed attempt
// left (facts, coverage, subjects); the tenant's next batch goes straight
// to ON CONFLICT, another tenant's does not.
func TestInsertFactsMeetingAStoredFact(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, testDatabaseURL(t)) // counters of its own
	require.NoError(t, err)
	defer db.Close()
	tn, other := newTenant(t), newTenant(t)
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)

	res, err := db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("ledger", "entry", "account:a1", "e1", at, commitlayer.Attrs{"v": 1}),
		mkFact("ledger", "entry", "account:a2", "e2", at, nil),
	})
	require.NoError(t, err)
	require.Equal(t, 2, res.Inserted)
	n, c, r := insertStats(db)
	require.Equal(t, [3]int64{1, 0, 0}, [3]int64{n, c, r}, "new facts: no ON CONFLICT")

	res, err = db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("ledger", "entry", "account:a3", "e3", at, nil),
		mkFact("ledger", "entry", "account:a4", "e4", at, nil, "customer:c9"),
		mkFact("ledger", "entry", "account:a1", "e1", at, commitlayer.Attrs{"v": 2}), // stored: the first wins
	})
	require.NoError(t, err)
	require.Equal(t, 2, res.Inserted)
	require.Equal(t, 1, res.Duplicates)
	require.Equal(t, []commitlayer.Subject{"account:a3", "account:a4", "customer:c9"}, res.Subjects)
	n, c, r = insertStats(db)
	require.Equal(t, [3]int64{1, 1, 1}, [3]int64{n, c, r}, "a stored fact: retried with ON CONFLICT")

	all, err := allFacts(ctx, db, tn.ID)
	require.NoError(t, err)
	require.Len(t, all, 4)
	for _, f := range all {
		if f.ExternalID == "e1" {
			require.EqualValues(t, 1, f.Attrs["v"], "the stored fact is kept")
		}
	}
	require.EqualValues(t, 4, coverageCount(t, db, tn.ID, "ledger"), "the failed attempt's coverage is rolled back")

	// The tenant's next batch of new facts: straight to ON CONFLICT.
	res, err = db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("ledger", "entry", "account:a5", "e5", at, nil)})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	n, c, r = insertStats(db)
	require.Equal(t, [3]int64{1, 2, 1}, [3]int64{n, c, r})
	// Another tenant's: without.
	_, err = db.InsertFacts(ctx, other.ID, []commitlayer.Fact{mkFact("ledger", "entry", "account:a1", "e1", at, nil)})
	require.NoError(t, err)
	n, c, r = insertStats(db)
	require.Equal(t, [3]int64{2, 2, 1}, [3]int64{n, c, r})

	// Once the window is over, the tenant's batches try without again.
	db.metStored.Store(tn.ID, time.Now().Add(-2*metStoredWindow))
	_, err = db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("ledger", "entry", "account:a6", "e6", at, nil)})
	require.NoError(t, err)
	n, c, r = insertStats(db)
	require.Equal(t, [3]int64{3, 2, 1}, [3]int64{n, c, r})
	_, kept := db.metStored.Load(tn.ID)
	require.False(t, kept, "a window that ended is forgotten")
	require.EqualValues(t, 6, coverageCount(t, db, tn.ID, "ledger"))

	// An invalid batch still fails whole, whatever the path.
	_, err = db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("ledger", "entry", "account:a7", "e7", at, commitlayer.Attrs{"s": "a\x00b"})})
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
}

// TestConcurrentOverlappingBatches: batches of the same facts in different
// orders, posted at once, store each fact once and fail none (a unique
// violation retried with ON CONFLICT, a deadlock retried by inTx); what
// they say they inserted adds up to what is stored, and so does coverage.
func TestConcurrentOverlappingBatches(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, testDatabaseURL(t))
	require.NoError(t, err)
	defer db.Close()
	tn := newTenant(t)
	at := time.Now().UTC().Add(-time.Hour)
	const facts, writers, rounds = 300, 4, 3
	base := make([]commitlayer.Fact, facts)
	for i := range base {
		base[i] = mkFact("ledger", "entry", fmt.Sprintf("account:a%d", i%50), fmt.Sprintf("e%d", i), at, commitlayer.Attrs{"i": i})
	}
	var (
		mu       sync.Mutex
		inserted int
		wg       sync.WaitGroup
		errs     = make(chan error, writers*rounds)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for r := range rounds {
				// Each round a different overlapping slice, shuffled.
				lo := (w*37 + r*61) % (facts / 2)
				batch := append([]commitlayer.Fact(nil), base[lo:lo+facts/2]...)
				rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
				res, err := db.InsertFacts(ctx, tn.ID, batch)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				inserted += res.Inserted
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	all, err := allFacts(ctx, db, tn.ID)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range all {
		require.False(t, seen[f.ExternalID], "fact %s stored twice", f.ExternalID)
		seen[f.ExternalID] = true
	}
	require.Equal(t, len(all), inserted, "what the batches say they inserted is what is stored")
	require.EqualValues(t, len(all), coverageCount(t, db, tn.ID, "ledger"))
	_, _, retried := insertStats(db)
	t.Logf("%d facts stored by %d batches; %d retried with ON CONFLICT", len(all), writers*rounds, retried)
}

// TestFactsKeepBatchOrder: facts are inserted in key order (for the lock
// order) but numbered in batch order, so facts of one instant read back
// in the order they were sent, on both insert paths.
func TestFactsKeepBatchOrder(t *testing.T) {
	ctx := context.Background()
	db := testStore(t)
	tn := newTenant(t)
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	// External ids against their key order, sources too.
	batch := []commitlayer.Fact{
		mkFact("zeta", "entry", "account:a1", "e9", at, nil),
		mkFact("alpha", "entry", "account:a1", "e8", at, nil),
		mkFact("zeta", "entry", "account:a1", "e1", at, nil),
		mkFact("alpha", "entry", "account:a1", "e0", at, nil),
	}
	_, err := db.InsertFacts(ctx, tn.ID, batch)
	require.NoError(t, err)
	// The ON CONFLICT path: a stored fact first, then new ones.
	second := []commitlayer.Fact{
		batch[0],
		mkFact("zeta", "entry", "account:a1", "d7", at, nil),
		mkFact("alpha", "entry", "account:a1", "d3", at, nil),
	}
	_, err = db.InsertFacts(ctx, tn.ID, second)
	require.NoError(t, err)
	got, err := db.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"account:a1"})
	require.NoError(t, err)
	var ids []string
	for _, f := range got {
		ids = append(ids, f.Source+"/"+f.ExternalID)
	}
	require.Equal(t, []string{"zeta/e9", "alpha/e8", "zeta/e1", "alpha/e0", "zeta/d7", "alpha/d3"}, ids)
}

// TestNumberingAgainKeepsBatchOrder: a transaction retried (a deadlock)
// numbers its rows again, in batch order still, not in the key order the
// first attempt wrote them in.
func TestNumberingAgainKeepsBatchOrder(t *testing.T) {
	ctx := context.Background()
	db := testStore(t)
	at := time.Now().UTC().Add(-time.Hour)
	rows, err := encodeFacts([]commitlayer.Fact{
		mkFact("zeta", "entry", "account:a1", "e1", at, nil),
		mkFact("alpha", "entry", "account:a1", "e2", at, nil),
	}, 0)
	require.NoError(t, err)
	tx, err := db.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read-only use
	for range 2 {
		numbered, err := numberFacts(ctx, tx, rows)
		require.NoError(t, err)
		require.Equal(t, []string{"alpha", "zeta"}, []string{numbered[0].source, numbered[1].source}, "written in key order")
		require.Less(t, numbered[1].seq, numbered[0].seq, "numbered in batch order")
	}
}

// allFacts returns every fact of a tenant, ordered by occurred_at then seq.
func allFacts(ctx context.Context, db *DB, tenantID string) ([]commitlayer.Fact, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+factColumns+` FROM facts WHERE tenant_id = $1 ORDER BY occurred_at, seq`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanFact)
}

// insertStats counts the batches insertFacts stored: new (inserted without
// ON CONFLICT), conflict (with it) and, of those, retried (the insert
// without it met a stored fact first).
func insertStats(db *DB) (newBatches, conflictBatches, retriedBatches int64) {
	return db.newBatches.Load(), db.conflictBatches.Load(), db.retriedBatches.Load()
}
