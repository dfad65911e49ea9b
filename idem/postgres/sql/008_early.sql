-- Early events: versioned events that arrived before their predecessor,
-- kept until it is applied (then applied and deleted in its transaction) or
-- until the hold expires (then parked). One row per early event.
CREATE TABLE IF NOT EXISTS {{early}} (
    consumer     TEXT        NOT NULL,
    aggregate_id TEXT        NOT NULL,
    version      BIGINT      NOT NULL,
    message_id   TEXT        NOT NULL,
    msg_key      TEXT        NOT NULL,
    headers      TEXT        NOT NULL,
    body         BYTEA       NOT NULL,
    held_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, aggregate_id, version)
);
CREATE INDEX IF NOT EXISTS {{early_held_idx}} ON {{early}} (consumer, held_at);
