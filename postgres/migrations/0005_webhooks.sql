-- Verdict webhooks: a tenant's subscriptions (the signing secret sealed
-- with COMMITLAYER_SECRETS_KEY, never stored in clear) and each event's
-- delivery to each of them, with its attempts.
CREATE TABLE webhooks (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         text NOT NULL CHECK (id <> ''),
    url        text NOT NULL CHECK (url <> ''),
    events     text[] NOT NULL CHECK (cardinality(events) > 0),
    secret     text NOT NULL CHECK (secret <> ''),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

CREATE TABLE webhook_deliveries (
    tenant_id    text NOT NULL,
    webhook_id   text NOT NULL,
    event_id     text NOT NULL,
    event_type   text NOT NULL,
    action_id    text NOT NULL,
    sequence     integer NOT NULL,
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failing')),
    attempts     integer NOT NULL DEFAULT 0,
    last_status  integer NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    PRIMARY KEY (tenant_id, webhook_id, event_id),
    FOREIGN KEY (tenant_id, webhook_id) REFERENCES webhooks (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (tenant_id, webhook_id, created_at DESC, sequence DESC);
