-- The outbox is one plain table again, as before migration 010: an add is
-- a plain INSERT (no partition routing, no slice default) and the
-- polling relay's claim probes one set of indexes (issue 46). 010's
-- slice 0, the outbox table of before 010 with its rows and indexes, is
-- detached and becomes the outbox again (no copy); the rows of the other
-- slices are copied into it with their IDs; the partitioned parent, its
-- other slices, their catalog, sequence and function are dropped; slice 0
-- gets the identity back, continuing the parent's numbering; the
-- publications that published the parent publish the table (with the
-- same columns). See docs/retention.md.
DO $$
DECLARE
    n     TEXT;
    s     TEXT;
    start BIGINT;
    pubs  TEXT[];
    cols  TEXT[];
    i     INT;
    li    TEXT;
BEGIN
    SELECT c.relname, ns.nspname INTO n, s
        FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = '{{outbox}}'::regclass;
    SELECT GREATEST(coalesce(pg_sequence_last_value(pg_get_serial_sequence(format('%I.%I', s, n), 'id')::regclass), 0),
        (SELECT coalesce(max(id), 0) FROM {{outbox}})) + 1 INTO start;
    -- A message ID the application gave twice, in two slices, where one
    -- copy is not sent yet: keeping one would lose an event. Stop.
    IF EXISTS (SELECT 1 FROM {{outbox}} o WHERE o.slice <> 0 AND EXISTS (SELECT 1 FROM {{outbox}} d
            WHERE d.message_id = o.message_id AND d.id <> o.id AND (d.state IN (0, 2) OR o.state IN (0, 2)))) THEN
        RAISE EXCEPTION 'idem: migration 015: a message ID is in the outbox twice with an unsent copy; send or discard one (SELECT message_id FROM % GROUP BY 1 HAVING count(*) > 1)',
            format('%I.%I', s, n);
    END IF;
    -- The publications of the parent, and the columns each publishes
    -- ('' for all).
    SELECT array_agg(p.pubname ORDER BY p.pubname),
        array_agg(coalesce((SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_attribute a
            WHERE a.attrelid = r.prrelid AND a.attnum = ANY (r.prattrs)), '') ORDER BY p.pubname)
        INTO pubs, cols
        FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid WHERE r.prrelid = '{{outbox}}'::regclass;
    EXECUTE format('ALTER TABLE %I.%I DETACH PARTITION %I.%I', s, n, s, n || '_s0');
    EXECUTE format('INSERT INTO %I.%I (id, message_id, aggregate_id, version, sequence, type, headers, payload, state, attempts, '
        'created_at, next_attempt, last_error, sent_at, slice, claims_only) '
        'SELECT id, message_id, aggregate_id, version, sequence, type, headers, payload, state, attempts, '
        'created_at, next_attempt, last_error, sent_at, 0, claims_only FROM %I.%I ON CONFLICT DO NOTHING', s, n || '_s0', s, n);
    EXECUTE format('DROP TABLE %I.%I', s, n);
    EXECUTE format('ALTER TABLE %I.%I RENAME TO %I', s, n || '_s0', n);
    EXECUTE format('ALTER TABLE %I.%I DROP COLUMN slice', s, n);
    -- 013's index, on slice 0 under a name of the partition's, gets its
    -- own name back.
    SELECT c.relname INTO li FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = format('%I.%I', s, n)::regclass AND pg_get_expr(i.indpred, i.indrelid) LIKE '%claims_only%';
    IF li IS NOT NULL AND li <> n || '_left_idx' THEN
        EXECUTE format('ALTER INDEX %I.%I RENAME TO %I', s, li, n || '_left_idx');
    END IF;
    EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START %s)', s, n, start);
    FOR i IN 1 .. coalesce(array_length(pubs, 1), 0) LOOP
        IF cols[i] = '' THEN
            EXECUTE format('ALTER PUBLICATION %I ADD TABLE %I.%I', pubs[i], s, n);
        ELSE
            EXECUTE format('ALTER PUBLICATION %I ADD TABLE %I.%I (%s)', pubs[i], s, n, cols[i]);
        END IF;
    END LOOP;
END
$$;
DROP FUNCTION {{outbox_slice_add}}();
DROP TABLE {{outbox_slices}};
DROP SEQUENCE {{outbox_slice_seq}};

-- The previous table of a sliced outbox (Options.OutboxSlice): the rows
-- that were sent or discarded when the current table was rotated out;
-- dropped whole by the next rotation (see outbox_retain.go). Empty
-- unless OutboxSlice is set.
CREATE TABLE {{outbox_prev}} (LIKE {{outbox}} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);

-- When the current table of a sliced outbox was created (one row, none
-- before the first rotation).
CREATE TABLE {{outbox_rotated}} (
    one BOOLEAN     PRIMARY KEY DEFAULT TRUE CHECK (one),
    at  TIMESTAMPTZ NOT NULL
);
