-- Idempotency keys for external calls: staged with their intent in the
-- caller's transaction, then called, then the outcome recorded. Times are
-- Unix microseconds.
-- States: 0 staged, 1 in flight, 2 succeeded, 3 failed, 4 unknown.
CREATE TABLE IF NOT EXISTS {{idempotency_keys}} (
    provider      TEXT    NOT NULL,
    idem_key      TEXT    NOT NULL,
    intent        BLOB    NOT NULL,
    state         INTEGER NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0,
    result        BLOB    NOT NULL DEFAULT x'',
    error         TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    first_call_at INTEGER,
    last_call_at  INTEGER,
    lease_until   INTEGER,
    done_at       INTEGER,
    PRIMARY KEY (provider, idem_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{keys_state_idx}} ON {{idempotency_keys}} (provider, state, created_at);
