-- The version an early event's aggregate awaited when it was held (its
-- version then, plus one), for the operator's listing (wary parked
-- early); 0 for events held before this column existed.
ALTER TABLE {{early}} ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0;
