-- An agent's retry of a recorded call is an attempt of the call's action:
-- the action's claim becomes its latest attempt's and the attempt joins its
-- trace (RecordAttempt). One row per attempt key, so an attempt sent twice
-- is recorded once.
CREATE TABLE action_attempts (
    tenant_id    text NOT NULL,
    action_id    text NOT NULL,
    key          text NOT NULL CHECK (key <> ''),
    request_hash bytea NOT NULL,
    attempted_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key),
    FOREIGN KEY (tenant_id, action_id) REFERENCES actions (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX action_attempts_action ON action_attempts (tenant_id, action_id, attempted_at);
