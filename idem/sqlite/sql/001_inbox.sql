-- The inbox: one row per (consumer, message) whose effect was committed.
-- Times are Unix microseconds.
CREATE TABLE IF NOT EXISTS {{inbox}} (
    consumer     TEXT        NOT NULL,
    message_id   TEXT        NOT NULL,
    processed_at INTEGER     NOT NULL,
    PRIMARY KEY (consumer, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{inbox_processed_idx}} ON {{inbox}} (consumer, processed_at);
