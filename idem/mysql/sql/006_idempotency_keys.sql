-- Idempotency keys for external calls: staged with their intent in the
-- caller's transaction, then called, then the outcome recorded. Times are
-- Unix microseconds. States: 0 staged, 1 in flight, 2 succeeded, 3 failed,
-- 4 unknown.
CREATE TABLE IF NOT EXISTS {{idempotency_keys}} (
    provider      VARBINARY(255) NOT NULL,
    idem_key      VARBINARY(255) NOT NULL,
    intent        LONGBLOB       NOT NULL,
    state         TINYINT        NOT NULL DEFAULT 0,
    attempts      INT            NOT NULL DEFAULT 0,
    result        LONGBLOB       NOT NULL DEFAULT (''),
    error         MEDIUMTEXT     NOT NULL DEFAULT (''),
    created_at    BIGINT         NOT NULL,
    first_call_at BIGINT         NULL,
    last_call_at  BIGINT         NULL,
    lease_until   BIGINT         NULL,
    done_at       BIGINT         NULL,
    PRIMARY KEY (provider, idem_key),
    KEY {{keys_state_idx}} (provider, state, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
