-- The outbox stream (RelayOptions.Stream) publishes its windows without
-- checking them against the table while the table holds nothing that
-- would make a check leave a row out or hold an aggregate back (see
-- store.OutboxStream.Clear): no quarantined row, and no pending row that
-- failed before, was requeued (its next attempt is no longer its creation
-- time), or is for the claims only.
--
-- claims_only (moved until now): the stream never publishes the row, the
-- claims do. The purge sets it on a row it moves to the current slice (a
-- move is an insert in the log), and the stream on the rows of a window it
-- did not publish (failed, or held back behind an unsent row of their
-- aggregate).
ALTER TABLE {{outbox}} RENAME COLUMN moved TO claims_only;

-- The rows Clear looks for: few, usually none.
CREATE INDEX IF NOT EXISTS {{outbox_left_idx}} ON {{outbox}} (id)
    WHERE state = 2 OR (state = 0 AND (attempts > 0 OR claims_only OR next_attempt <> created_at));
