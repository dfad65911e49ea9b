-- The park: messages set aside for an operator, replayed in aggregate,
-- version, sequence and parking order.
CREATE TABLE IF NOT EXISTS {{parked}} (
    id           BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer     VARBINARY(255)  NOT NULL,
    message_id   VARBINARY(1024) NOT NULL,
    aggregate_id VARBINARY(1024) NOT NULL,
    version      BIGINT          NOT NULL,
    sequence     BIGINT          NOT NULL,
    msg_key      VARBINARY(1024) NOT NULL,
    headers      MEDIUMTEXT      NOT NULL,
    body         LONGBLOB        NOT NULL,
    reason       MEDIUMTEXT      NOT NULL,
    attempts     INT             NOT NULL,
    first_seen   BIGINT          NOT NULL,
    last_seen    BIGINT          NOT NULL,
    UNIQUE KEY (consumer, message_id),
    KEY {{parked_aggregate_idx}} (consumer, aggregate_id, version, sequence, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
