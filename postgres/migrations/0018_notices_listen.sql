-- The notice of new facts carries their digest (what kinds, since when,
-- whether any links a subject: contracts.Digest), so its deliverer can leave
-- asleep the verifications such facts cannot change without reading them.
-- A notice is due at once, for whichever process's deliverer claims it
-- first; its insert wakes the deliverers (LISTEN commitlayer_notices) at
-- commit.
ALTER TABLE fact_notifications ADD COLUMN digest jsonb;
ALTER TABLE fact_notifications ALTER COLUMN next_attempt_at SET DEFAULT now();

CREATE FUNCTION notify_fact_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('commitlayer_notices', '');
    RETURN NULL;
END $$;

CREATE TRIGGER fact_notifications_notify AFTER INSERT ON fact_notifications
    FOR EACH STATEMENT EXECUTE FUNCTION notify_fact_notifications();
