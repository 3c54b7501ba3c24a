-- Listing actions with their current verdict (GET /v1/actions, the
-- console) and rotating webhook secrets.
--
-- Each action carries its current verdict's status, provisional flag and
-- version, kept by a trigger on the verdict history (which is only ever
-- appended to): a list filtered by status pages through one index instead
-- of joining every action's latest verdict. NULL status = no verdict yet
-- (verification pending).
ALTER TABLE actions
    ADD COLUMN verdict_status      text,
    ADD COLUMN verdict_provisional boolean,
    ADD COLUMN verdict_version     integer;

UPDATE actions a SET verdict_status = v.status, verdict_provisional = v.provisional, verdict_version = v.version
FROM (SELECT DISTINCT ON (tenant_id, action_id) tenant_id, action_id, status, provisional, version
      FROM verdicts ORDER BY tenant_id, action_id, version DESC) v
WHERE a.tenant_id = v.tenant_id AND a.id = v.action_id;

CREATE FUNCTION actions_current_verdict() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE actions SET verdict_status = NEW.status, verdict_provisional = NEW.provisional,
        verdict_version = NEW.version
    WHERE tenant_id = NEW.tenant_id AND id = NEW.action_id
      AND (verdict_version IS NULL OR verdict_version < NEW.version);
    RETURN NULL;
END $$;

CREATE TRIGGER verdicts_current AFTER INSERT ON verdicts
    FOR EACH ROW EXECUTE FUNCTION actions_current_verdict();

-- Keyset pages, newest first: (requested_at, id) under each filter. The
-- contract and contract+agent filters use actions_contract and
-- actions_agent (0001) scanned backwards; those below cover the rest.
-- actions_list also covers the stats query's columns: counting a window
-- is an index-only scan (measured on 320 000 actions of one tenant: 69 000
-- in a day counted in 0.13 s, all 320 000 in 0.9 s, on a loaded machine).
CREATE INDEX actions_list ON actions (tenant_id, requested_at, id) INCLUDE (contract_id, agent, verdict_status);
CREATE INDEX actions_list_status ON actions (tenant_id, verdict_status, requested_at, id);
CREATE INDEX actions_list_agent ON actions (tenant_id, agent, requested_at, id);
CREATE INDEX actions_list_subject ON actions (tenant_id, subject, requested_at, id);
-- Open provisional verdicts (the console's overview), few at any time.
CREATE INDEX actions_list_provisional ON actions (tenant_id, requested_at, id) WHERE verdict_provisional;

-- Secret rotation: the secret a rotation replaced keeps signing next to
-- the new one until previous_until, then stops (sealed like secret).
ALTER TABLE webhooks
    ADD COLUMN previous_secret text,
    ADD COLUMN previous_until  timestamptz,
    ADD COLUMN rotated_at      timestamptz;
