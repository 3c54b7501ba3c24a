-- Spans of POST /v1/traces that looked like a bound tool call but became
-- no action, and why: the newest few per tenant (the API trims them as it
-- adds), shown by GET /v1/sources. Kept here, not in an API process, so
-- every replica shows the same.
CREATE TABLE span_rejections (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    at        timestamptz NOT NULL,
    trace_id  text NOT NULL,
    span_id   text NOT NULL,
    tool      text NOT NULL,
    dialect   text NOT NULL,
    message   text NOT NULL
);
CREATE INDEX span_rejections_tenant ON span_rejections (tenant_id, id DESC);
