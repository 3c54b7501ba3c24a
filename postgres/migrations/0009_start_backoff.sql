-- Each pending start is tried on its own: a start that fails waits its own
-- backoff (next_start_at, start_attempts, start_error), so one that Temporal
-- keeps refusing never holds back another tenant's. A start Temporal refuses
-- for good (its input is bad: InvalidArgument) marks the verification
-- failed with the reason, and leaves the queue.
ALTER TABLE actions
    ADD COLUMN start_attempts         integer NOT NULL DEFAULT 0,
    ADD COLUMN next_start_at          timestamptz,
    ADD COLUMN start_error            text NOT NULL DEFAULT '',
    ADD COLUMN verification_failed_at timestamptz,
    ADD COLUMN verification_error     text NOT NULL DEFAULT '';

DROP INDEX IF EXISTS actions_pending_start;
CREATE INDEX actions_pending_start ON actions (tenant_id, created_at)
    WHERE verification_started_at IS NULL AND verification_failed_at IS NULL;
