\set i random(1, 1000000000)
\set a random(1, 100)
BEGIN;
INSERT INTO orders (id, payload) VALUES ('o' || :i || '-' || pg_backend_pid() || '-' || clock_timestamp(), '{"event":1,"aggregate":"agg-001","type":"order.placed","amount":1234}');
\startpipeline
INSERT INTO plain (message_id, aggregate_id, payload, created_at) VALUES ('w' || :i || '-' || pg_backend_pid() || '-' || clock_timestamp(), 'agg-' || :a, '\x7b226576656e74223a312c22616767726567617465223a226167672d303031222c2274797065223a226f726465722e706c61636564222c22616d6f756e74223a313233347d'::bytea, now());
END;
\endpipeline
