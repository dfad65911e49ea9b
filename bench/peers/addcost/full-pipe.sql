\set i random(1, 1000000000)
\set a random(1, 100)
BEGIN;
INSERT INTO orders (id, payload) VALUES ('o' || :i || '-' || pg_backend_pid() || '-' || clock_timestamp(), '{"event":1,"aggregate":"agg-001","type":"order.placed","amount":1234}');
\startpipeline
WITH c AS (INSERT INTO wary_outbox_aggregates AS a (aggregate_id, last_sequence) VALUES ('agg-' || :a, 1) ON CONFLICT (aggregate_id) DO UPDATE SET last_sequence = a.last_sequence + 1 RETURNING last_sequence)
INSERT INTO wary_outbox (message_id, aggregate_id, version, sequence, type, headers, payload, created_at, next_attempt)
SELECT 'w' || :i || '-' || pg_backend_pid() || '-' || clock_timestamp(), 'agg-' || :a, 1, c.last_sequence, 'order.placed', '{}', '\x7b226576656e74223a312c22616767726567617465223a226167672d303031222c2274797065223a226f726465722e706c61636564222c22616d6f756e74223a313233347d'::bytea, now(), now() FROM c
RETURNING sequence, wary_outbox_wake_notify(4242, 'wary_chan');
END;
\endpipeline
