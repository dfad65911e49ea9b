-- The inbox is one plain table again, with its primary key (consumer,
-- message_id): the claim is one INSERT ... ON CONFLICT, with no function
-- and no lock of its own (issue 46). 009's slice 0, the inbox table of
-- before 009 with its records and indexes, is detached and becomes the
-- inbox again (no copy); the records of the other slices (stores that
-- set InboxSlice) are copied into it; the partitioned parent, its other
-- slices and their catalog are dropped. See docs/retention.md.
DO $$
DECLARE
    n TEXT;
    s TEXT;
BEGIN
    SELECT c.relname, ns.nspname INTO n, s
        FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = '{{inbox}}'::regclass;
    EXECUTE format('ALTER TABLE %I.%I DETACH PARTITION %I.%I', s, n, s, n || '_s0');
    EXECUTE format('INSERT INTO %I.%I (consumer, message_id, processed_at) SELECT consumer, message_id, processed_at FROM %I.%I '
        'ON CONFLICT (consumer, message_id) DO NOTHING', s, n || '_s0', s, n);
    EXECUTE format('DROP TABLE %I.%I', s, n);
    EXECUTE format('ALTER TABLE %I.%I RENAME TO %I', s, n || '_s0', n);
END
$$;
ALTER TABLE {{inbox}} DROP COLUMN slice;
DROP TABLE {{inbox_slices}};

-- v is set by the claims of a sliced inbox (Options.InboxSlice) and by
-- the claim function below, never by a binary of before 009. A sliced
-- inbox adds the check inbox_claims_need_migration_014 (v IS NOT NULL,
-- NOT VALID: for new rows only) to its current table, so that such a
-- binary, whose claim would not look in the previous table, fails instead
-- of claiming a message twice. A stale snapshot makes v NULL too (see
-- store.go).
ALTER TABLE {{inbox}} ADD COLUMN v SMALLINT;

-- The previous table of a sliced inbox: read-only, looked in by every
-- claim of a sliced inbox, dropped whole by a rotation (see retain.go).
-- Empty unless InboxSlice is set.
CREATE TABLE {{inbox_prev}} (
    consumer     TEXT        NOT NULL,
    message_id   TEXT        NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL,
    v            SMALLINT,
    PRIMARY KEY (consumer, message_id)
);

-- The claim function of migrations 009 to 013 stays, for the binaries of
-- those versions that run beside this one during a rolling upgrade: it
-- claims in the plain table as this version does, looking in the previous
-- table too. It first locks the current table, so that under READ
-- COMMITTED its statements' snapshots follow any rotation it waited for.
-- Under REPEATABLE READ or SERIALIZABLE the transaction's snapshot may
-- predate a rotation: if the current table's mark (the row of consumer
-- '') is not visible while the previous table's is, it fails with a
-- serialization failure, which the inbox retries.
DROP FUNCTION {{inbox_claim}}(TEXT, TEXT[], TIMESTAMPTZ, BOOLEAN);
CREATE FUNCTION {{inbox_claim}}(p_consumer TEXT, p_ids TEXT[], p_at TIMESTAMPTZ, p_strict BOOLEAN)
RETURNS SETOF TEXT LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    LOCK TABLE {{inbox}} IN ROW EXCLUSIVE MODE;
    IF current_setting('transaction_isolation') <> 'read committed'
        AND EXISTS (SELECT 1 FROM {{inbox_prev}} WHERE consumer = '' AND message_id = '')
        AND NOT EXISTS (SELECT 1 FROM {{inbox}} WHERE consumer = '' AND message_id = '') THEN
        RAISE EXCEPTION 'idem: the inbox rotated after this transaction began (migration 014)'
            USING ERRCODE = 'serialization_failure';
    END IF;
    IF p_strict THEN
        IF EXISTS (SELECT 1 FROM {{inbox_prev}} WHERE consumer = p_consumer AND message_id = ANY (p_ids)) THEN
            RAISE EXCEPTION 'idem: message already claimed' USING ERRCODE = 'unique_violation';
        END IF;
        RETURN QUERY INSERT INTO {{inbox}} AS t (consumer, message_id, processed_at, v)
            SELECT p_consumer, i, p_at, 1 FROM unnest(p_ids) AS i ORDER BY i COLLATE "C" RETURNING t.message_id;
        RETURN;
    END IF;
    RETURN QUERY INSERT INTO {{inbox}} AS t (consumer, message_id, processed_at, v)
        SELECT p_consumer, i, p_at, 1 FROM unnest(p_ids) AS i
        WHERE NOT EXISTS (SELECT 1 FROM {{inbox_prev}} p WHERE p.consumer = p_consumer AND p.message_id = i)
        ORDER BY i COLLATE "C" ON CONFLICT (consumer, message_id) DO NOTHING RETURNING t.message_id;
END
$$;
