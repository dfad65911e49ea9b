-- The outbox: events written in the domain transaction, published by the
-- relay. outbox_aggregates holds each aggregate's last assigned sequence;
-- its row is locked by the adding transaction until it ends, so sequences
-- of one aggregate commit in order and without gaps. Counter rows are never
-- purged, so sequences keep growing after sent rows are deleted.
-- States: 0 pending, 1 sent, 2 quarantined, 3 discarded.
CREATE TABLE IF NOT EXISTS {{outbox_aggregates}} (
    aggregate_id  TEXT   PRIMARY KEY,
    last_sequence BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {{outbox}} (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id   TEXT        NOT NULL UNIQUE,
    aggregate_id TEXT        NOT NULL,
    version      BIGINT      NOT NULL,
    sequence     BIGINT      NOT NULL,
    type         TEXT        NOT NULL,
    headers      TEXT        NOT NULL,
    payload      BYTEA       NOT NULL,
    state        SMALLINT    NOT NULL DEFAULT 0,
    attempts     INTEGER     NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ NOT NULL,
    next_attempt TIMESTAMPTZ NOT NULL,
    last_error   TEXT        NOT NULL DEFAULT '',
    sent_at      TIMESTAMPTZ,
    UNIQUE (aggregate_id, sequence)
);
-- Due rows, scanned by the relay's claim.
CREATE INDEX IF NOT EXISTS {{outbox_pending_idx}} ON {{outbox}} (id) WHERE state = 0;
-- Unsent rows per aggregate: "is there an earlier unsent row?"
CREATE INDEX IF NOT EXISTS {{outbox_unsent_idx}} ON {{outbox}} (aggregate_id, sequence) WHERE state IN (0, 2);
-- Finished rows, for the purge.
CREATE INDEX IF NOT EXISTS {{outbox_sent_idx}} ON {{outbox}} (sent_at) WHERE state IN (1, 3);
