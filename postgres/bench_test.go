package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// BenchmarkInsertFacts stores new facts in batches of 1 000, each with a few
// attrs and a link, as a connector pull or POST /v1/facts would, and reports
// facts/s.
func BenchmarkInsertFacts(b *testing.B) {
	testDB := testStore(b)
	ctx := context.Background()
	tn := newTenant(b)
	const batchSize = 1000
	batch := make([]commitlayer.Fact, batchSize)
	n := 0
	cpu0 := cpuTimes(b)
	for b.Loop() {
		b.StopTimer()
		for i := range batch {
			n++
			batch[i] = mkFact("payments", "refund_created", fmt.Sprintf("order:o%d", n%5000), fmt.Sprintf("re_%d", n),
				t0, commitlayer.Attrs{"amount": int64(n), "currency": "usd", "status": "succeeded"},
				commitlayer.Subject(fmt.Sprintf("customer:c%d", n%700)))
		}
		b.StartTimer()
		res, err := testDB.InsertFacts(ctx, tn.ID, batch)
		require.NoError(b, err)
		require.Equal(b, batchSize, res.Inserted)
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "facts/s")
	// CPU spent per batch by this process (including building the batches)
	// and by the Postgres backends serving this test database: unlike
	// facts/s, these barely move when other work shares the machine.
	if cpu1 := cpuTimes(b); cpu0.ok && cpu1.ok {
		b.ReportMetric(float64((cpu1.client-cpu0.client).Milliseconds())/float64(b.N), "client-cpu-ms/batch")
		b.ReportMetric(float64((cpu1.server-cpu0.server).Milliseconds())/float64(b.N), "server-cpu-ms/batch")
	}
}

// BenchmarkInsertFactsInFlight is BenchmarkInsertFacts with four batches
// in flight on one tenant and source, as `commitlayer bench scale` posts
// them: what the two cores give when client and server overlap, and the
// batches queue on the source's coverage row.
func BenchmarkInsertFactsInFlight(b *testing.B) {
	testDB := testStore(b)
	ctx := context.Background()
	tn := newTenant(b)
	const batchSize, inFlight = 1000, 4
	batches := make([][]commitlayer.Fact, b.N)
	n := 0
	for k := range batches {
		batches[k] = make([]commitlayer.Fact, batchSize)
		for i := range batches[k] {
			n++
			batches[k][i] = mkFact("payments", "refund_created", fmt.Sprintf("order:o%d", n%5000), fmt.Sprintf("re_%d", n),
				t0, commitlayer.Attrs{"amount": int64(n), "currency": "usd", "status": "succeeded"},
				commitlayer.Subject(fmt.Sprintf("customer:c%d", n%700)))
		}
	}
	var next atomic.Int64
	errs := make([]error, inFlight)
	cpu0 := cpuTimes(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range inFlight {
		wg.Go(func() {
			for k := int(next.Add(1)) - 1; k < len(batches); k = int(next.Add(1)) - 1 {
				res, err := testDB.InsertFacts(ctx, tn.ID, batches[k])
				if err == nil && res.Inserted != batchSize {
					err = fmt.Errorf("batch %d: %d inserted", k, res.Inserted)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "facts/s")
	if cpu1 := cpuTimes(b); cpu0.ok && cpu1.ok {
		b.ReportMetric(float64((cpu1.client-cpu0.client).Milliseconds())/float64(b.N), "client-cpu-ms/batch")
		b.ReportMetric(float64((cpu1.server-cpu0.server).Milliseconds())/float64(b.N), "server-cpu-ms/batch")
	}
}

type cpuSample struct {
	client, server time.Duration
	ok             bool
}

// cpuTimes reads this process's CPU time and, from /proc, that of the
// Postgres backends connected to the test database (Linux, same host only;
// ok is false otherwise).
func cpuTimes(b *testing.B) cpuSample {
	testDB := testStore(b)
	rows, err := testDB.Pool().Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	require.NoError(b, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(b, err)
	client, server, ok := testenv.CPU(pids)
	return cpuSample{client: client, server: server, ok: ok}
}

// BenchmarkInsertFactsDuplicates re-posts one batch of 1 000 already stored
// facts: the cost of an idempotent retry.
func BenchmarkInsertFactsDuplicates(b *testing.B) {
	testDB := testStore(b)
	ctx := context.Background()
	tn := newTenant(b)
	batch := make([]commitlayer.Fact, 1000)
	for i := range batch {
		batch[i] = mkFact("payments", "refund_created", fmt.Sprintf("order:o%d", i), fmt.Sprintf("re_%d", i), t0,
			commitlayer.Attrs{"amount": int64(i)})
	}
	_, err := testDB.InsertFacts(ctx, tn.ID, batch)
	require.NoError(b, err)
	for b.Loop() {
		res, err := testDB.InsertFacts(ctx, tn.ID, batch)
		require.NoError(b, err)
		require.Equal(b, len(batch), res.Duplicates)
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "facts/s")
}

// BenchmarkFactsAbout reads the history of one order (its facts, the
// customers they link and those customers' facts) among 20 000 facts.
func BenchmarkFactsAbout(b *testing.B) {
	testDB := testStore(b)
	ctx := context.Background()
	tn := newTenant(b)
	batch := make([]commitlayer.Fact, 1000)
	for k := range 20 {
		for i := range batch {
			n := k*1000 + i
			batch[i] = mkFact("payments", "refund_created", fmt.Sprintf("order:o%d", n%2000), fmt.Sprintf("re_%d", n), t0,
				nil, commitlayer.Subject(fmt.Sprintf("customer:c%d", n%300)))
		}
		_, err := testDB.InsertFacts(ctx, tn.ID, batch)
		require.NoError(b, err)
	}
	// Steady state: statistics gathered and the GIN pending list flushed,
	// as autovacuum does in a running service.
	_, err := testDB.Pool().Exec(ctx, `VACUUM ANALYZE facts`)
	require.NoError(b, err)
	for b.Loop() {
		facts, err := testDB.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"order:o7"})
		require.NoError(b, err)
		require.NotEmpty(b, facts)
	}
}
