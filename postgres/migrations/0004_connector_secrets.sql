-- Connectors of other kinds than http_events: kind-specific settings
-- (config), a secret sealed with COMMITLAYER_SECRETS_KEY (AES-GCM, never
-- stored in clear) and the hint that may be shown (its last 4).
ALTER TABLE connectors ADD COLUMN config jsonb NOT NULL DEFAULT '{}';
ALTER TABLE connectors ADD COLUMN secret text NOT NULL DEFAULT '';
ALTER TABLE connectors ADD COLUMN secret_hint text NOT NULL DEFAULT '';
