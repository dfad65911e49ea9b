-- Early events: versioned events that arrived before their predecessor,
-- kept until it is applied (then applied and deleted in its transaction)
-- or until the hold expires (then parked). awaited is the version the
-- aggregate awaited when the event was held, for the operator's listing.
CREATE TABLE IF NOT EXISTS {{early}} (
    consumer     VARBINARY(255)  NOT NULL,
    aggregate_id VARBINARY(1024) NOT NULL,
    version      BIGINT          NOT NULL,
    message_id   VARBINARY(1024) NOT NULL,
    msg_key      VARBINARY(1024) NOT NULL,
    headers      MEDIUMTEXT      NOT NULL,
    body         LONGBLOB        NOT NULL,
    held_at      BIGINT          NOT NULL,
    awaited      BIGINT          NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, aggregate_id, version),
    KEY {{early_held_idx}} (consumer, held_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
