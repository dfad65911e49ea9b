-- The adding transaction's wake-up in its single statement (see sqlcore's
-- addOneStatement and IdleOutbox): take the wake lock shared, then notify
-- the outbox's channel if a relay waits (a wake flag is set) or if the
-- transaction is not READ COMMITTED. The function must stay VOLATILE:
-- a VOLATILE function takes a fresh snapshot for each query it runs, so
-- the flags are read with a snapshot taken after the lock was granted,
-- not with the calling statement's, which may predate a relay's flag.
-- Adding transactions of earlier versions keep their two statements.
CREATE OR REPLACE FUNCTION {{outbox_wake_notify}}(wake_key BIGINT, channel TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(wake_key);
    IF current_setting('transaction_isolation') <> 'read committed'
        OR EXISTS (SELECT 1 FROM {{outbox_wake}} WHERE idle) THEN
        PERFORM pg_notify(channel, '');
        RETURN TRUE;
    END IF;
    RETURN FALSE;
END
$$;
