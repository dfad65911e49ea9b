-- One wake flag per waiting relay (name 'relay:' and its owner), so that a
-- relay that finds work clears only its own: another one may still wait.
-- A flag expires unless its relay renews it (a relay that crashed while
-- waiting). The single 'outbox' row of 005 is kept, cleared: relays of
-- the earlier version still set and clear it, and producers notify while
-- any row is set.
--
-- The table is unlogged: setting and clearing a flag writes no WAL, so
-- those commits wait for no disk flush. A server crash empties it; every
-- relay then finds its flag gone when it next renews it (at most its
-- PollInterval later) and sets it again, polling meanwhile.
ALTER TABLE {{outbox_wake}} ADD COLUMN IF NOT EXISTS expires_at TIMESTAMPTZ;
UPDATE {{outbox_wake}} SET idle = FALSE WHERE name = 'outbox';
ALTER TABLE {{outbox_wake}} SET UNLOGGED;
