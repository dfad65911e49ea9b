-- The inbox becomes a table partitioned by slice, so that records expire
-- by whole tables (detached and dropped) instead of row DELETEs. Slice 0
-- is the inbox table as it was, renamed and attached with its records and
-- indexes (no copy): it takes the records of consumers without slices
-- (unbounded retention) and claims made before their consumer's slices
-- exist, and keeps row deletes. Slices 1, 2, ... each hold one consumer's
-- records claimed in a time range [lo, hi) (inbox_slices); the store's
-- expiry creates them ahead of the claims and drops them whole once hi is
-- older than the consumer's retention. See docs/retention.md.
--
-- A slice's primary key is (consumer, message_id); the parent has none
-- (PostgreSQL requires the partition key in a unique key). The claim
-- function below gives the uniqueness across slices: it takes a
-- transaction-scoped advisory lock on the (consumer, message ID) and then
-- looks for the record in every slice with a fresh snapshot.
ALTER TABLE {{inbox}} ADD COLUMN slice BIGINT NOT NULL DEFAULT 0 CHECK (slice = 0);

DO $$
DECLARE
    n TEXT;
    s TEXT;
BEGIN
    SELECT c.relname, ns.nspname INTO n, s
        FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = '{{inbox}}'::regclass;
    EXECUTE format('ALTER TABLE %I.%I RENAME TO %I', s, n, n || '_s0');
    EXECUTE format('CREATE TABLE %I.%I (consumer TEXT NOT NULL, message_id TEXT NOT NULL, '
        'processed_at TIMESTAMPTZ NOT NULL, slice BIGINT NOT NULL DEFAULT 0) PARTITION BY LIST (slice)', s, n);
    EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES IN (0)', s, n, s, n || '_s0');
END
$$;

-- One row per slice: its consumer and time range. retired: past the
-- retention, no longer receiving claims, being detached and dropped.
CREATE TABLE IF NOT EXISTS {{inbox_slices}} (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer TEXT        NOT NULL,
    lo       TIMESTAMPTZ NOT NULL,
    hi       TIMESTAMPTZ NOT NULL,
    retired  BOOLEAN     NOT NULL DEFAULT FALSE
);
CREATE INDEX IF NOT EXISTS {{inbox_slices_idx}} ON {{inbox_slices}} (consumer, lo);

-- Claims ids (distinct) for consumer at the time at, in order, and returns
-- those it claimed; with strict, a message claimed before raises
-- unique_violation (the claim sent with BEGIN). Each (consumer, message
-- ID) is locked first, in the order of the lock keys (no deadlock between
-- overlapping claims), until the transaction ends: a concurrent claim of
-- the same message waits, then finds it (committed) or claims it (rolled
-- back), whichever slice each one inserts into. The function is VOLATILE
-- so that, under READ COMMITTED, each of its queries takes a snapshot
-- after the locks were granted. SERIALIZABLE is safe too (the two claims'
-- reads and inserts conflict); REPEATABLE READ is refused, since its one
-- snapshot may predate a concurrent claim that committed in another slice.
-- Its queries keep their generic plans (planning the look-up in every
-- slice anew for each claim costs more than running it).
CREATE OR REPLACE FUNCTION {{inbox_claim}}(p_consumer TEXT, p_ids TEXT[], p_at TIMESTAMPTZ, p_strict BOOLEAN)
RETURNS SETOF TEXT LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_key  INTEGER;
    v_id   TEXT;
    v_slc  BIGINT;
BEGIN
    IF current_setting('transaction_isolation') = 'repeatable read' THEN
        RAISE EXCEPTION 'idem: the inbox claim runs under READ COMMITTED or SERIALIZABLE, not REPEATABLE READ'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    FOR v_key IN SELECT DISTINCT hashtext(p_consumer || E'\n' || i) FROM unnest(p_ids) AS i ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(hashtext('{{inbox}}'), v_key);
    END LOOP;
    SELECT id INTO v_slc FROM {{inbox_slices}}
        WHERE consumer = p_consumer AND lo <= p_at AND p_at < hi AND NOT retired ORDER BY lo DESC LIMIT 1;
    FOREACH v_id IN ARRAY p_ids LOOP
        IF NOT EXISTS (SELECT 1 FROM {{inbox}} WHERE consumer = p_consumer AND message_id = v_id) THEN
            INSERT INTO {{inbox}} (consumer, message_id, processed_at, slice)
                VALUES (p_consumer, v_id, p_at, coalesce(v_slc, 0));
            RETURN NEXT v_id;
        ELSIF p_strict THEN
            RAISE EXCEPTION 'idem: message already claimed' USING ERRCODE = 'unique_violation';
        END IF;
    END LOOP;
END
$$;
