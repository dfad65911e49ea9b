-- The relay's wake-up flag: producers send NOTIFY only while idle is true
-- (a relay went to wait for one). PostgreSQL serialises the commits of
-- notifying transactions, so producers do not notify while relays are busy
-- (they poll). See Outbox.IdleOutbox.
CREATE TABLE IF NOT EXISTS {{outbox_wake}} (
    name TEXT    PRIMARY KEY,
    idle BOOLEAN NOT NULL
);
INSERT INTO {{outbox_wake}} (name, idle) VALUES ('outbox', TRUE) ON CONFLICT (name) DO NOTHING;
