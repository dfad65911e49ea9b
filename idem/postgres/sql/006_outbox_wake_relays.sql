-- One wake flag per waiting relay (name 'relay:' and its owner), so that a
-- relay that finds work clears only its own: another one may still wait.
-- A flag expires unless its relay renews it (a relay that crashed while
-- waiting). The single 'outbox' row of 005 is kept, cleared: relays of
-- the earlier version still set and clear it, and producers notify while
-- any row is set.
ALTER TABLE {{outbox_wake}} ADD COLUMN IF NOT EXISTS expires_at TIMESTAMPTZ;
UPDATE {{outbox_wake}} SET idle = FALSE WHERE name = 'outbox';
