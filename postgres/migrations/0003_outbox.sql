-- Durable delivery: what the API and the pulls accepted is finished later
-- when Temporal (or a worker) is away when it is accepted.
--
-- fact_notifications is an outbox: a batch of facts and the notice to the
-- verifications watching its subjects are written in one transaction; the
-- notice is deleted once delivered, retried with backoff until then.
CREATE TABLE fact_notifications (
    id               bigserial PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    subjects         text[] NOT NULL,
    except_action_id text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    last_error       text NOT NULL DEFAULT ''
);
CREATE INDEX fact_notifications_due ON fact_notifications (next_attempt_at);

-- An action is recorded with its verification pending; the start marks it
-- started, and a reconciler starts every action still pending.
ALTER TABLE actions ADD COLUMN verification_started_at timestamptz;
UPDATE actions SET verification_started_at = created_at;
CREATE INDEX actions_pending_start ON actions (created_at) WHERE verification_started_at IS NULL;

-- One row naming this database, so a worker can tell it reads the
-- database the API writes (a worker on another database, or a replica
-- that lags, fails its verifications' lookups).
CREATE TABLE store_identity (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id        text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO store_identity (id) VALUES (md5(random()::text || clock_timestamp()::text));
