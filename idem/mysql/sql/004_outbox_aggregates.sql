-- The outbox's sequence counters: each aggregate's last assigned sequence.
-- The adding transaction's upsert locks the counter row until it commits,
-- so an aggregate's sequences commit in order and without gaps. Counter
-- rows are never purged.
CREATE TABLE IF NOT EXISTS {{outbox_aggregates}} (
    aggregate_id  VARBINARY(1024) NOT NULL PRIMARY KEY,
    last_sequence BIGINT          NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
