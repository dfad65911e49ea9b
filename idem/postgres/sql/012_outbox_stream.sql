-- The outbox stream's slots and whether the rows committed before each
-- slot was created have all been published from the table (a relay's
-- Drain after creating the slot). A relay that opens an existing slot not
-- yet drained (the relay that created it stopped during its Drain) drains
-- first: those rows are in no stream.
CREATE TABLE IF NOT EXISTS {{outbox_stream}} (
    slot    TEXT PRIMARY KEY,
    drained BOOLEAN NOT NULL DEFAULT FALSE
);
