-- The inbox: one row per (consumer, message) whose effect was committed.
CREATE TABLE IF NOT EXISTS {{inbox}} (
    consumer     TEXT        NOT NULL,
    message_id   TEXT        NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS {{inbox_processed_idx}} ON {{inbox}} (consumer, processed_at);
