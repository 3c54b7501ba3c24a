-- The benchmark's own tables, in its own schema (benchmark) of the
-- product's database. They name product tenants but the product never reads
-- them.
--
-- Databases created before the benchmark had its schema hold
-- public.benchmark_runs (product migration 0001), public.benchmark_agent_steps
-- (product migration 0008) and tenants.benchmark_run_id (product migration
-- 0004). They move here: the two tables by ALTER TABLE ... SET SCHEMA (rows,
-- indexes and all), the column's marks copied into run_tenants. The column
-- itself stays on tenants (always NULL from now on): the product's table is
-- the product's to change.

DO $$
BEGIN
    IF to_regclass('benchmark.runs') IS NULL AND to_regclass('benchmark_runs') IS NOT NULL THEN
        ALTER TABLE benchmark_runs SET SCHEMA benchmark;
        ALTER TABLE benchmark.benchmark_runs RENAME TO runs;
    END IF;
    IF to_regclass('benchmark.agent_steps') IS NULL AND to_regclass('benchmark_agent_steps') IS NOT NULL THEN
        ALTER TABLE benchmark_agent_steps SET SCHEMA benchmark;
        ALTER TABLE benchmark.benchmark_agent_steps RENAME TO agent_steps;
    END IF;
END $$;

-- Benchmark runs are admin records: they name the tenant a run used but
-- outlive it, so purging a run's tenants keeps its results. Payloads are
-- json (not jsonb) so they come back byte for byte.
CREATE TABLE IF NOT EXISTS benchmark.runs (
    id          text PRIMARY KEY CHECK (id <> ''),
    status      text NOT NULL,
    request     json,
    summary     json,
    results     json,
    markdown    text NOT NULL DEFAULT '',
    log_tail    text NOT NULL DEFAULT '',
    tenant_id   text NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS benchmark_runs_started ON benchmark.runs (started_at DESC);

-- The tenants a run created, one per scenario: a purge finds them here,
-- never by a name pattern. A deleted tenant takes its row with it.
CREATE TABLE benchmark.run_tenants (
    run_id     text NOT NULL CHECK (run_id <> ''),
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    PRIMARY KEY (run_id, tenant_id)
);
CREATE INDEX run_tenants_tenant ON benchmark.run_tenants (tenant_id);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
               WHERE table_name = 'tenants' AND column_name = 'benchmark_run_id'
                 AND table_schema = current_schema()) THEN
        EXECUTE 'INSERT INTO benchmark.run_tenants (run_id, tenant_id)
                 SELECT benchmark_run_id, id FROM tenants WHERE benchmark_run_id IS NOT NULL
                 ON CONFLICT DO NOTHING';
    END IF;
END $$;

-- The write-ahead record of a model-driven agent's steps in a benchmark
-- scenario: one row per model turn and per tool call, keyed by run,
-- scenario, kind and index. An activity writes its row before it acts and
-- the answer after; a retried activity (a worker that stopped) answers the
-- recorded result instead of paying for the turn again or repeating the
-- call. request_hash ties a retry to the request it repeats.
CREATE TABLE IF NOT EXISTS benchmark.agent_steps (
    run_id       text NOT NULL,
    scenario_id  text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('turn', 'call')),
    idx          integer NOT NULL CHECK (idx >= 0),
    request_hash bytea NOT NULL,
    result       jsonb,
    started_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    PRIMARY KEY (run_id, scenario_id, kind, idx)
);
