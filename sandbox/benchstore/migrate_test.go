package benchstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

// freshDatabase creates a database of its own for one test, dropped after
// it, and opens the product's store on it with the product's migrations
// applied.
func freshDatabase(t *testing.T) (*postgres.DB, string) {
	t.Helper()
	base := testenv.Postgres(t)
	u, err := url.Parse(base)
	require.NoError(t, err)
	name := fmt.Sprintf("%s_bs%d", strings.TrimPrefix(u.Path, "/"), time.Now().UnixNano()%1e9)
	u.Path = "/" + name
	ctx := context.Background()
	require.NoError(t, postgres.CreateDatabaseIfMissing(ctx, u.String()))
	t.Cleanup(func() {
		admin := *u
		admin.Path = "/postgres"
		conn, err := pgx.Connect(context.Background(), admin.String())
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	db, err := postgres.Open(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.Migrate(ctx))
	return db, u.String()
}

// TestMigrateMovesTheOldTables: a database the product migrated while it
// still held the benchmark's tables (public.benchmark_runs,
// public.benchmark_agent_steps, tenants.benchmark_run_id) keeps its runs,
// steps and run marks in the benchmark schema after the benchmark's first
// migration, and nothing of them stays in public but the dead column.
func TestMigrateMovesTheOldTables(t *testing.T) {
	db, _ := freshDatabase(t)
	ctx := context.Background()
	pool := db.Pool()
	// The tables as product migrations 0001, 0004 and 0008 made them.
	_, err := pool.Exec(ctx, `
		CREATE TABLE benchmark_runs (
			id text PRIMARY KEY CHECK (id <> ''), status text NOT NULL, request json, summary json, results json,
			markdown text NOT NULL DEFAULT '', log_tail text NOT NULL DEFAULT '', tenant_id text NOT NULL DEFAULT '',
			started_at timestamptz NOT NULL, finished_at timestamptz, created_at timestamptz NOT NULL DEFAULT now());
		CREATE INDEX benchmark_runs_started ON benchmark_runs (started_at DESC);
		ALTER TABLE tenants ADD COLUMN benchmark_run_id text;
		CREATE TABLE benchmark_agent_steps (
			run_id text NOT NULL, scenario_id text NOT NULL, kind text NOT NULL CHECK (kind IN ('turn', 'call')),
			idx integer NOT NULL CHECK (idx >= 0), request_hash bytea NOT NULL, result jsonb,
			started_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz,
			PRIMARY KEY (run_id, scenario_id, kind, idx));
		INSERT INTO benchmark_runs (id, status, request, started_at) VALUES ('bench_old', 'done', '{"only":  ["refund/"]}', now());
		INSERT INTO benchmark_agent_steps (run_id, scenario_id, kind, idx, request_hash, result)
			VALUES ('bench_old', 'refund/baseline', 'turn', 0, '\x01', '{"text":"hi"}')`)
	require.NoError(t, err)
	old, _, err := db.CreateTenant(ctx, "benchmark bench_old refund/baseline")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE tenants SET benchmark_run_id = 'bench_old' WHERE id = $1`, old.ID)
	require.NoError(t, err)
	bystander, _, err := db.CreateTenant(ctx, "customer")
	require.NoError(t, err)

	s := benchstore.New(db)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Migrate(ctx), "a second migrate finds the work done")

	run, err := s.GetBenchmarkRun(ctx, "bench_old")
	require.NoError(t, err)
	require.Equal(t, json.RawMessage(`{"only":  ["refund/"]}`), run.Request, "byte for byte")
	res, _, err := s.BeginAgentStep(ctx, "bench_old", "refund/baseline", "turn", 0, []byte{1})
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"hi"}`, string(res))
	tenants, err := s.BenchmarkTenants(ctx, "bench_old")
	require.NoError(t, err)
	require.Len(t, tenants, 1)
	require.Equal(t, old.ID, tenants[0].ID)
	for _, table := range []string{"benchmark_runs", "benchmark_agent_steps"} {
		var reg *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, table).Scan(&reg))
		require.Nil(t, reg, "%s left public", table)
	}
	n, err := s.PurgeBenchmarkTenants(ctx, "bench_old")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	all, err := s.ListTenants(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, bystander.ID, all[0].ID)
}

// TestMigrateFreshConcurrent: on a database the product migrated today (no
// benchmark table anywhere), several processes migrating at once all
// succeed and the schema works.
func TestMigrateFreshConcurrent(t *testing.T) {
	db, u := freshDatabase(t)
	ctx := context.Background()
	var reg *string
	require.NoError(t, db.Pool().QueryRow(ctx, `SELECT to_regclass('benchmark_runs')::text`).Scan(&reg))
	require.Nil(t, reg, "the product's migrations make no benchmark table")
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		other, err := postgres.Open(ctx, u)
		require.NoError(t, err)
		t.Cleanup(other.Close)
		wg.Go(func() { errs[i] = benchstore.New(other).Migrate(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	s := benchstore.New(db)
	tn, _, err := s.CreateBenchmarkTenant(ctx, "run-fresh", "refund/baseline")
	require.NoError(t, err)
	got, err := s.BenchmarkTenants(ctx, "run-fresh")
	require.NoError(t, err)
	require.Equal(t, tn.ID, got[0].ID)
}
