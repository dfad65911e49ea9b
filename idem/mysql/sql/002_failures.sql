-- Failed attempts at messages that may be parked (gaps).
CREATE TABLE IF NOT EXISTS {{failures}} (
    consumer   VARBINARY(255)  NOT NULL,
    message_id VARBINARY(1024) NOT NULL,
    attempts   INT             NOT NULL,
    first_seen BIGINT          NOT NULL,
    last_seen  BIGINT          NOT NULL,
    reason     MEDIUMTEXT      NOT NULL,
    PRIMARY KEY (consumer, message_id),
    KEY {{failures_seen_idx}} (consumer, last_seen)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
