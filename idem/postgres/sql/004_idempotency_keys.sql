-- Idempotency keys for external calls: staged with their intent in the
-- caller's transaction, then called, then the outcome recorded.
-- States: 0 staged, 1 in flight, 2 succeeded, 3 failed, 4 unknown.
CREATE TABLE IF NOT EXISTS {{idempotency_keys}} (
    provider      TEXT        NOT NULL,
    idem_key      TEXT        NOT NULL,
    intent        BYTEA       NOT NULL,
    state         SMALLINT    NOT NULL DEFAULT 0,
    attempts      INTEGER     NOT NULL DEFAULT 0,
    result        BYTEA       NOT NULL DEFAULT '',
    error         TEXT        NOT NULL DEFAULT '',
    created_at    TIMESTAMPTZ NOT NULL,
    first_call_at TIMESTAMPTZ,
    last_call_at  TIMESTAMPTZ,
    lease_until   TIMESTAMPTZ,
    done_at       TIMESTAMPTZ,
    PRIMARY KEY (provider, idem_key)
);
CREATE INDEX IF NOT EXISTS {{keys_state_idx}} ON {{idempotency_keys}} (provider, state, created_at);
