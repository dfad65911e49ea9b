-- The aggregate locks of the early events: 1024 rows, one per range of
-- lock keys (the key's top bits, so that keys locked in ascending order
-- lock their rows in ascending order too), each locked by an UPDATE held
-- until the transaction ends. MySQL's GET_LOCK is held by the session,
-- not the transaction, so it cannot serve.
CREATE TABLE IF NOT EXISTS {{aggregate_locks}} (
    k INT NOT NULL PRIMARY KEY
) ENGINE=InnoDB
