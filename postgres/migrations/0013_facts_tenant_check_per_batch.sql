-- facts.tenant_id REFERENCES tenants cost ingest one RI check per row: a
-- query on tenants, run through SPI, for every fact stored (measured with
-- BenchmarkInsertFacts: 3.5–4.6 ms of a 1 000-fact batch's 22–34 ms in
-- EXPLAIN ANALYZE; Postgres CPU per batch 10–20 % lower without it; see
-- docs/benchmarks.md, "Ingest: per-row costs in PostgreSQL").
-- insertFacts now checks the tenant once per batch instead, in the batch's
-- transaction, with the lock the RI check took (SELECT ... FOR KEY SHARE):
-- a tenant being deleted makes the batch wait and then fail with
-- ErrNotFound, and a tenant delete waits for a batch that holds the lock
-- and then deletes the facts it committed.
--
-- ON DELETE CASCADE becomes a trigger: a row trigger, like the RI cascade,
-- so each tenant's facts are deleted through an index led by tenant_id.
-- Each statement of a PL/pgSQL function takes a new snapshot under READ
-- COMMITTED (the isolation DeleteTenant runs at), so the delete sees facts
-- committed by a batch it waited for. TRUNCATE tenants (which with the
-- other tables' foreign keys needs CASCADE) empties facts too.
--
-- The other tables keep their foreign keys: each gets a row per batch, per
-- action or per source, not per fact.
ALTER TABLE facts DROP CONSTRAINT facts_tenant_id_fkey;

CREATE FUNCTION tenants_delete_facts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM facts WHERE tenant_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER tenants_delete_facts AFTER DELETE ON tenants
    FOR EACH ROW EXECUTE FUNCTION tenants_delete_facts();

CREATE FUNCTION tenants_truncate_facts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    TRUNCATE facts;
    RETURN NULL;
END
$$;
CREATE TRIGGER tenants_truncate_facts AFTER TRUNCATE ON tenants
    FOR EACH STATEMENT EXECUTE FUNCTION tenants_truncate_facts();

