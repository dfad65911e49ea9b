-- The outbox: events written in the domain transaction, published by the
-- relay. States: 0 pending, 1 sent, 2 quarantined, 3 discarded. MySQL has
-- no partial indexes: outbox_unsent_idx leads with the aggregate so that
-- an aggregate's lowest unsent row is two index probes, outbox_pending_idx
-- serves the relay's walk over pending heads in aggregate order, and
-- outbox_sent_idx the purge of sent rows. Times are Unix microseconds.
CREATE TABLE IF NOT EXISTS {{outbox}} (
    id           BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    message_id   VARBINARY(1024) NOT NULL,
    aggregate_id VARBINARY(1024) NOT NULL,
    version      BIGINT          NOT NULL,
    sequence     BIGINT          NOT NULL,
    type         TEXT            NOT NULL,
    headers      MEDIUMTEXT      NOT NULL,
    payload      LONGBLOB        NOT NULL,
    state        TINYINT         NOT NULL DEFAULT 0,
    attempts     INT             NOT NULL DEFAULT 0,
    created_at   BIGINT          NOT NULL,
    next_attempt BIGINT          NOT NULL,
    last_error   MEDIUMTEXT      NOT NULL DEFAULT (''),
    sent_at      BIGINT          NULL,
    UNIQUE KEY (message_id),
    UNIQUE KEY (aggregate_id, sequence),
    KEY {{outbox_unsent_idx}} (aggregate_id, state, sequence),
    KEY {{outbox_pending_idx}} (state, aggregate_id, sequence),
    KEY {{outbox_sent_idx}} (state, sent_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
