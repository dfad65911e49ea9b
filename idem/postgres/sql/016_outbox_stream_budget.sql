-- The WAL budget (SourceOptions.WALBudget): each time a relay dropped the
-- stream's slot because it retained more log than the budget, the count,
-- when, and how much it retained then. wary outbox status shows them.
ALTER TABLE {{outbox_stream}} ADD COLUMN IF NOT EXISTS released BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {{outbox_stream}} ADD COLUMN IF NOT EXISTS released_at TIMESTAMPTZ;
ALTER TABLE {{outbox_stream}} ADD COLUMN IF NOT EXISTS released_lag BIGINT;
