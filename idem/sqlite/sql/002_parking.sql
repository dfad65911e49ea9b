-- Failed attempts at messages that may be parked (gaps), and the park.
CREATE TABLE IF NOT EXISTS {{failures}} (
    consumer   TEXT        NOT NULL,
    message_id TEXT        NOT NULL,
    attempts   INTEGER     NOT NULL,
    first_seen INTEGER     NOT NULL,
    last_seen  INTEGER     NOT NULL,
    reason     TEXT        NOT NULL,
    PRIMARY KEY (consumer, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{failures_seen_idx}} ON {{failures}} (consumer, last_seen);

CREATE TABLE IF NOT EXISTS {{parked}} (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer     TEXT        NOT NULL,
    message_id   TEXT        NOT NULL,
    aggregate_id TEXT        NOT NULL,
    version      INTEGER     NOT NULL,
    sequence     INTEGER     NOT NULL,
    msg_key      TEXT        NOT NULL,
    headers      TEXT        NOT NULL,
    body         BLOB        NOT NULL,
    reason       TEXT        NOT NULL,
    attempts     INTEGER     NOT NULL,
    first_seen   INTEGER     NOT NULL,
    last_seen    INTEGER     NOT NULL,
    UNIQUE (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS {{parked_aggregate_idx}} ON {{parked}} (consumer, aggregate_id, version, sequence, id);
