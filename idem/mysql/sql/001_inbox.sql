-- The inbox: one row per (consumer, message) whose effect was committed.
-- IDs are VARBINARY: compared byte for byte (a case-insensitive collation
-- would take "A" and "a" for one message), any bytes kept as they are.
-- Times are Unix microseconds. Each migration file is one statement, so
-- that the store needs no multiStatements in the DSN; MySQL commits each
-- DDL statement on its own, so every statement here is idempotent (IF NOT
-- EXISTS) and a migration interrupted before its record runs again.
CREATE TABLE IF NOT EXISTS {{inbox}} (
    consumer     VARBINARY(255)  NOT NULL,
    message_id   VARBINARY(1024) NOT NULL,
    processed_at BIGINT          NOT NULL,
    PRIMARY KEY (consumer, message_id),
    KEY {{inbox_processed_idx}} (consumer, processed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
