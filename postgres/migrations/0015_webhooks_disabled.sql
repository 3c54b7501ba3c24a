-- A webhook whose receiver answers 410 Gone is disabled (the Standard
-- Webhooks specification: the receiver wants no more); its deliveries
-- not yet made are given up ('failed'). Re-enabled by the tenant.
ALTER TABLE webhooks
    ADD COLUMN disabled_at     timestamptz,
    ADD COLUMN disabled_reason text NOT NULL DEFAULT '';

ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('pending', 'delivered', 'failing', 'failed'));
