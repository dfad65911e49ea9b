-- The outbox becomes a table partitioned by slice, so that sent rows
-- expire by whole tables (detached and dropped) instead of row DELETEs.
-- Slice 0 is the outbox table as it was, renamed and attached with its
-- rows and indexes (no copy); it keeps row deletes. Slices 1, 2, ... take
-- the rows added while each is current; outbox_slices lists them. Which
-- slice is current is the last value of the sequence outbox_slice_seq,
-- read by the column's default (non-transactional: an adding transaction
-- of any isolation level, however old, reads the current one). The
-- relay's purge creates the next slice ahead (ATTACH PARTITION: adds go
-- on), makes it current once the current one is Options.OutboxSlice old,
-- and drops a past slice once every row in it is sent or discarded and
-- older than KeepSent, after moving the unsent rows left in it to the
-- current slice. See docs/retention.md.
--
-- Primary and unique keys hold per slice (PostgreSQL requires the
-- partition key in a unique key of a partitioned table): the ID comes from
-- the parent's identity, a sequence never reused, and each aggregate's
-- sequences from its counter row (outbox_aggregates).
--
-- moved: the row was moved from an earlier slice by the purge. Moving is
-- an insert in the log, which the outbox stream (RelayOptions.Stream)
-- must not publish: the stream leaves moved rows to the claims.
ALTER TABLE {{outbox}} ADD COLUMN slice BIGINT NOT NULL DEFAULT 0 CHECK (slice = 0);
ALTER TABLE {{outbox}} ADD COLUMN moved BOOLEAN NOT NULL DEFAULT FALSE;

CREATE SEQUENCE IF NOT EXISTS {{outbox_slice_seq}} MINVALUE 0 START 0;
SELECT setval('{{outbox_slice_seq}}', 0, true);

-- One row per slice (slice 0 has none). since: when it became current
-- (NULL: created ahead); until: when the next one did (NULL: current or
-- ahead); retired: every row sent or discarded and older than the
-- retention, being detached and dropped.
CREATE TABLE IF NOT EXISTS {{outbox_slices}} (
    id      BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    since   TIMESTAMPTZ,
    until   TIMESTAMPTZ,
    retired BOOLEAN     NOT NULL DEFAULT FALSE
);

DO $$
DECLARE
    n     TEXT;
    s     TEXT;
    start BIGINT;
    pubs  TEXT[];
    p     TEXT;
BEGIN
    SELECT c.relname, ns.nspname INTO n, s
        FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = '{{outbox}}'::regclass;
    -- The parent's identity continues the old one's.
    SELECT GREATEST(coalesce(pg_sequence_last_value(pg_get_serial_sequence(format('%I.%I', s, n), 'id')::regclass), 0),
        (SELECT coalesce(max(id), 0) FROM {{outbox}})) + 1 INTO start;
    -- The publications of the outbox stream (by the table's OID, which the
    -- renamed slice 0 keeps) publish the parent instead.
    SELECT array_agg(pub.pubname) INTO pubs FROM pg_publication pub
        JOIN pg_publication_rel r ON r.prpubid = pub.oid WHERE r.prrelid = '{{outbox}}'::regclass;
    EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN id DROP IDENTITY', s, n);
    EXECUTE format('ALTER TABLE %I.%I RENAME TO %I', s, n, n || '_s0');
    EXECUTE format('CREATE TABLE %I.%I (id BIGINT GENERATED ALWAYS AS IDENTITY (START %s), message_id TEXT NOT NULL, '
        'aggregate_id TEXT NOT NULL, version BIGINT NOT NULL, sequence BIGINT NOT NULL, type TEXT NOT NULL, '
        'headers TEXT NOT NULL, payload BYTEA NOT NULL, state SMALLINT NOT NULL DEFAULT 0, '
        'attempts INTEGER NOT NULL DEFAULT 0, created_at TIMESTAMPTZ NOT NULL, next_attempt TIMESTAMPTZ NOT NULL, '
        'last_error TEXT NOT NULL DEFAULT '''', sent_at TIMESTAMPTZ, '
        'slice BIGINT NOT NULL DEFAULT pg_sequence_last_value(%L::regclass), moved BOOLEAN NOT NULL DEFAULT FALSE) '
        'PARTITION BY LIST (slice)', s, n, start, '{{outbox_slice_seq}}');
    EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES IN (0)', s, n, s, n || '_s0');
    FOREACH p IN ARRAY coalesce(pubs, '{}') LOOP
        EXECUTE format('ALTER PUBLICATION %I SET TABLE %I.%I', p, s, n);
        EXECUTE format('ALTER PUBLICATION %I SET (publish_via_partition_root = true)', p);
    END LOOP;
END
$$;

-- Creates a slice ahead (not current): its catalog row, its table with
-- the indexes slice 0 has, attached to the outbox (SHARE UPDATE
-- EXCLUSIVE on the outbox: adds and claims go on). Returns its ID.
CREATE OR REPLACE FUNCTION {{outbox_slice_add}}() RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    v_id BIGINT;
    n    TEXT;
    s    TEXT;
    t    TEXT;
BEGIN
    INSERT INTO {{outbox_slices}} DEFAULT VALUES RETURNING id INTO v_id;
    SELECT c.relname, ns.nspname INTO n, s
        FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = '{{outbox}}'::regclass;
    t := n || '_s' || v_id;
    EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I)', s, t, s, n);
    EXECUTE format('ALTER TABLE %I.%I ADD CHECK (slice = %s), ADD PRIMARY KEY (id), ADD UNIQUE (message_id), '
        'ADD UNIQUE (aggregate_id, sequence)', s, t, v_id);
    EXECUTE format('CREATE INDEX ON %I.%I (id) WHERE state = 0', s, t);
    EXECUTE format('CREATE INDEX ON %I.%I (aggregate_id, sequence) WHERE state IN (0, 2)', s, t);
    EXECUTE format('CREATE INDEX ON %I.%I (sent_at) WHERE state IN (1, 3)', s, t);
    EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES IN (%s)', s, n, s, t, v_id);
    RETURN v_id;
END
$$;

-- Slice 1 takes the adds from now on (nothing else runs on the outbox
-- while this migration holds it: no add can miss the new partition).
SELECT {{outbox_slice_add}}();
UPDATE {{outbox_slices}} SET since = now() WHERE id = (SELECT max(id) FROM {{outbox_slices}});
SELECT setval('{{outbox_slice_seq}}', (SELECT max(id) FROM {{outbox_slices}}), true);
