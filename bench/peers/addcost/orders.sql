\set i random(1, 1000000000)
BEGIN;
INSERT INTO orders (id, payload) VALUES ('o' || :i || '-' || pg_backend_pid() || '-' || clock_timestamp(), '{"event":1,"aggregate":"agg-001","type":"order.placed","amount":1234}');
END;
