package loadtest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/postgres"
)

// What the load test reads of and does to the product's database, on its
// pool: its own queries, none of them the product's.

// verdictStages says which of actionIDs have a verdict and, for each that
// has, whether one of its verdicts is final (not provisional), keyed by
// action id: what a watcher of many actions needs, read without the
// verdicts' bodies.
func verdictStages(ctx context.Context, db *postgres.DB, tenantID string, actionIDs []string) (map[string]bool, error) {
	out := make(map[string]bool, len(actionIDs))
	if len(actionIDs) == 0 {
		return out, nil
	}
	rows, err := db.Pool().Query(ctx, `SELECT action_id, bool_or(NOT provisional) FROM verdicts
		WHERE tenant_id = $1 AND action_id = ANY($2::text[])
		GROUP BY action_id`, tenantID, actionIDs)
	if err != nil {
		return nil, fmt.Errorf("verdict stages: %w", err)
	}
	var (
		id    string
		final bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &final}, func() error {
		out[id] = final
		return nil
	}); err != nil {
		return nil, fmt.Errorf("verdict stages: %w", err)
	}
	return out, nil
}

// storeSize is the size of the facts table.
type storeSize struct {
	Facts      int64            // rows, every tenant's
	TableBytes int64            // heap and TOAST
	IndexBytes int64            // every index
	Indexes    map[string]int64 // each index by name
}

// factStoreSize measures the facts table: its rows and its and its
// indexes' sizes on disk (for all tenants: Postgres does not split them).
func factStoreSize(ctx context.Context, db *postgres.DB) (storeSize, error) {
	s := storeSize{Indexes: map[string]int64{}}
	if err := db.Pool().QueryRow(ctx, `SELECT count(*), pg_table_size('facts'), pg_indexes_size('facts') FROM facts`).
		Scan(&s.Facts, &s.TableBytes, &s.IndexBytes); err != nil {
		return s, fmt.Errorf("fact store size: %w", err)
	}
	rows, err := db.Pool().Query(ctx, `SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
		FROM pg_index WHERE indrelid = 'facts'::regclass ORDER BY 1`)
	if err != nil {
		return s, fmt.Errorf("fact store size: %w", err)
	}
	var (
		name string
		size int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &size}, func() error { s.Indexes[name] = size; return nil }); err != nil {
		return s, fmt.Errorf("fact store size: %w", err)
	}
	return s, nil
}

func (s storeSize) bytesPerFact() float64 {
	if s.Facts == 0 {
		return math.NaN()
	}
	return float64(s.TableBytes+s.IndexBytes) / float64(s.Facts)
}

// factIndexes are the facts table's indexes, in the order indexSizes
// prints them.
var factIndexes = []string{"facts_pkey", "facts_tenant_id_source_external_id_key", "facts_subject", "facts_kind", "facts_link_keys", "facts_linked_subject"}

func (s storeSize) indexSizes() string {
	var parts []string
	for _, name := range factIndexes {
		if v, ok := s.Indexes[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimPrefix(name, "facts_"), mib(v)))
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range s.Indexes {
			if !yield(n) {
				return
			}
		}
	}) {
		if !slices.Contains(factIndexes, name) {
			parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimPrefix(name, "facts_"), mib(s.Indexes[name])))
		}
	}
	return strings.Join(parts, ", ")
}

// loadBatch is how many facts loadFacts stores per InsertFacts.
const loadBatch = 5000

// loadFacts stores a tenant's history through the product's insert path
// (postgres.DB.InsertFacts, batches of loadBatch) and returns how many
// facts were stored. Wait for their notices (noticesDrained) before
// measuring what comes next.
func loadFacts(ctx context.Context, db *postgres.DB, tenantID string, next func() (commitlayer.Fact, bool)) (int64, error) {
	var n int64
	batch := make([]commitlayer.Fact, 0, loadBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := db.InsertFacts(ctx, tenantID, batch)
		if err != nil {
			return fmt.Errorf("load facts: %w", err)
		}
		n += int64(res.Inserted)
		batch = batch[:0]
		return nil
	}
	for f, ok := next(); ok; f, ok = next() {
		if batch = append(batch, f); len(batch) == loadBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

// noticesDrained waits (up to 5 minutes) until the tenant's outbox of
// fact notices is empty, and returns how long that took.
func noticesDrained(ctx context.Context, db *postgres.DB, tenantID string) (time.Duration, error) {
	start := time.Now()
	for {
		n, err := db.PendingNotifications(ctx, tenantID)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("%d notices of new facts still undelivered after 5 minutes", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vacuum runs VACUUM (ANALYZE) of tables and returns how long it took.
func vacuum(ctx context.Context, db *postgres.DB, tables string) (time.Duration, error) {
	start := time.Now()
	if _, err := db.Pool().Exec(ctx, `VACUUM (ANALYZE) `+tables); err != nil {
		return 0, fmt.Errorf("vacuum %s: %w", tables, err)
	}
	return time.Since(start), nil
}

// autovacuums is how many autovacuum workers are at work in this
// database now (0 when that cannot be read).
func autovacuums(ctx context.Context, db *postgres.DB) int {
	var n int
	_ = db.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'autovacuum worker' AND datname = current_database()`).Scan(&n)
	return n
}

// othersPastRetention counts the facts of tenants other than tenantIDs
// older than retention: what the product's purge (postgres.DB.PurgeFacts,
// every tenant) would drop besides the load test's.
func othersPastRetention(ctx context.Context, db *postgres.DB, tenantIDs []string, retention time.Duration) (int64, error) {
	var n int64
	err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM facts WHERE tenant_id <> ALL($1::text[]) AND occurred_at < $2`,
		tenantIDs, time.Now().Add(-retention)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count other tenants' old facts: %w", err)
	}
	return n, nil
}
