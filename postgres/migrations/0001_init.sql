-- CommitLayer store, first schema. Every table below carries tenant_id and
-- every query filters on it; rows go with their tenant (ON DELETE CASCADE).

CREATE TABLE tenants (
    id           text PRIMARY KEY CHECK (id <> ''),
    name         text NOT NULL CHECK (name <> ''),
    api_key_hash bytea NOT NULL UNIQUE CHECK (length(api_key_hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE contracts (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         text NOT NULL CHECK (id <> ''),
    version    integer NOT NULL CHECK (version > 0),
    source     bytea NOT NULL CHECK (length(source) > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id, version)
);

CREATE TABLE facts (
    seq         bigserial PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    source      text NOT NULL CHECK (source <> ''),
    type        text NOT NULL CHECK (type <> ''),
    subject     text NOT NULL CHECK (subject ~ '^[a-z0-9_]+:[^ \t\r\n]+$'),
    external_id text NOT NULL CHECK (external_id <> '' AND length(external_id) <= 512),
    occurred_at timestamptz NOT NULL,
    attrs       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(attrs) = 'object'),
    links       text[] NOT NULL DEFAULT '{}',
    ingested_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, source, external_id)
);
CREATE INDEX facts_subject ON facts (tenant_id, subject, occurred_at);
CREATE INDEX facts_kind ON facts (tenant_id, source, type, occurred_at);

-- One row per (tenant, source) that ever sent a batch; updated in the
-- transaction that stores the facts.
CREATE TABLE source_coverage (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    source       text NOT NULL,
    fact_count   bigint NOT NULL DEFAULT 0,
    last_fact_at timestamptz,
    last_seen_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, source)
);

CREATE TABLE actions (
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id               text NOT NULL CHECK (id <> ''),
    contract_id      text NOT NULL CHECK (contract_id <> ''),
    contract_version integer NOT NULL DEFAULT 0,
    agent            text NOT NULL,
    subject          text NOT NULL,
    params           jsonb NOT NULL DEFAULT '{}',
    requested_at     timestamptz NOT NULL,
    claim_status     text NOT NULL DEFAULT '',
    claim_message    text NOT NULL DEFAULT '',
    trace            jsonb,
    settles_at       timestamptz NOT NULL,
    watch_until      timestamptz NOT NULL,
    idempotency_key  text,
    request_hash     bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX actions_idempotency ON actions (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX actions_subject ON actions (tenant_id, subject, watch_until);
CREATE INDEX actions_contract ON actions (tenant_id, contract_id, requested_at);
CREATE INDEX actions_agent ON actions (tenant_id, contract_id, agent, requested_at);

-- Verdict history: one row per change of answer, never updated.
CREATE TABLE verdicts (
    tenant_id    text NOT NULL,
    action_id    text NOT NULL,
    version      integer NOT NULL CHECK (version > 0),
    status       text NOT NULL CHECK (status IN ('PASS', 'FAIL', 'UNKNOWN')),
    provisional  boolean NOT NULL,
    body         jsonb NOT NULL,
    evaluated_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, action_id, version),
    FOREIGN KEY (tenant_id, action_id) REFERENCES actions (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE connectors (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL CHECK (id <> ''),
    source        text NOT NULL CHECK (source <> ''),
    kind          text NOT NULL CHECK (kind <> ''),
    url           text NOT NULL DEFAULT '',
    cursor        text NOT NULL DEFAULT '',
    last_pull_at  timestamptz,
    last_error    text NOT NULL DEFAULT '',
    last_error_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, source)
);
