-- The outbox: events written in the domain transaction, published by the
-- relay. outbox_aggregates holds each aggregate's last assigned sequence
-- (SQLite serialises writers, so sequences commit in order and without
-- gaps). Counter rows are never purged. Times are Unix microseconds.
-- States: 0 pending, 1 sent, 2 quarantined, 3 discarded.
CREATE TABLE IF NOT EXISTS {{outbox_aggregates}} (
    aggregate_id  TEXT    PRIMARY KEY,
    last_sequence INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS {{outbox}} (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id   TEXT    NOT NULL UNIQUE,
    aggregate_id TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    sequence     INTEGER NOT NULL,
    type         TEXT    NOT NULL,
    headers      TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    state        INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    next_attempt INTEGER NOT NULL,
    last_error   TEXT    NOT NULL DEFAULT '',
    sent_at      INTEGER,
    UNIQUE (aggregate_id, sequence)
);
CREATE INDEX IF NOT EXISTS {{outbox_pending_idx}} ON {{outbox}} (id) WHERE state = 0;
CREATE INDEX IF NOT EXISTS {{outbox_unsent_idx}} ON {{outbox}} (aggregate_id, sequence) WHERE state IN (0, 2);
CREATE INDEX IF NOT EXISTS {{outbox_sent_idx}} ON {{outbox}} (sent_at) WHERE state IN (1, 3);

-- The single relay lease: SQLite has no SKIP LOCKED, so one relay at a
-- time claims rows; the others wait for the lease.
CREATE TABLE IF NOT EXISTS {{relay_lease}} (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
