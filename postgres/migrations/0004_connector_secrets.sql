-- Connectors of other kinds than http_events: kind-specific settings
-- (config), a secret sealed with COMMITLAYER_SECRETS_KEY (AES-GCM, never
-- stored in clear) and the hint that may be shown (its last 4).
ALTER TABLE connectors ADD COLUMN config jsonb NOT NULL DEFAULT '{}';
ALTER TABLE connectors ADD COLUMN secret text NOT NULL DEFAULT '';
ALTER TABLE connectors ADD COLUMN secret_hint text NOT NULL DEFAULT '';

-- Benchmark tenants name their run: a purge finds them by this column,
-- not by a name pattern.
ALTER TABLE tenants ADD COLUMN benchmark_run_id text;
CREATE INDEX tenants_benchmark_run ON tenants (benchmark_run_id) WHERE benchmark_run_id IS NOT NULL;
