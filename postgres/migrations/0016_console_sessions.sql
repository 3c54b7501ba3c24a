-- Console sessions and rate limits live in the database, so any API
-- replica serves any user and a restart logs no one out.
--
-- A session is kept by the SHA-256 of its cookie's token (a dump of the
-- table hands out no live session). It ends at expires_at: its last use
-- plus the idle timeout, never after ends_at (its login plus the longest
-- session).
CREATE TABLE IF NOT EXISTS console_sessions (
    id_hash    bytea PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    ends_at    timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_tenant ON console_sessions (tenant_id, created_at);
CREATE INDEX IF NOT EXISTS console_sessions_expires ON console_sessions (expires_at);

-- Fixed-window counters (logins per address and per tenant, wrong bearer
-- keys per address): n events in the window that ends at until. Unlogged:
-- a crash of the database forgets them, which costs at most one window of
-- limits, and no write-ahead log is written per wrong key.
CREATE UNLOGGED TABLE IF NOT EXISTS rate_limits (
    key   text PRIMARY KEY,
    n     integer NOT NULL,
    until timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS rate_limits_until ON rate_limits (until);
