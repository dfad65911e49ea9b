package postgres

import (
	"context"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// The outbox on PostgreSQL: relays claim rows with FOR UPDATE SKIP LOCKED
// in a transaction they hold while publishing. An adding transaction sends
// a NOTIFY only while a relay waits for one (a relay's wake flag is set):
// the commits of notifying transactions are serialised, so while relays
// are busy they poll instead. An add is one statement (one round trip,
// whatever its size): it upserts the sequence counters, inserts the rows
// and calls <prefix>outbox_wake_notify (migration 007), a VOLATILE
// PL/pgSQL function that takes a shared advisory lock that a relay going
// idle must get exclusively (Store.IdleOutbox), and then, in a query with
// a snapshot of its own, reads the flags and notifies. See sqlcore's
// IdleOutbox and addOneStatement for why no commit is slept through.
func outboxDialect(auto sqlcore.Querier) sqlcore.OutboxDialect {
	return sqlcore.OutboxDialect{
		SkipLocked: true,
		Notify: `SELECT pg_notify(%s, '') WHERE current_setting('transaction_isolation') <> 'read committed'
			OR EXISTS (SELECT 1 FROM {{outbox_wake}} WHERE idle)`,
		WakeShared: "pg_advisory_xact_lock_shared(%s)",
		WakeTry:    "pg_try_advisory_xact_lock(%s)",
		// One statement per add: the counters, the rows and the wake-up
		// (migration 007's function: the lock, then the flags with a
		// snapshot of their own).
		OneStatementAdd: true,
		WakeNotify:      "{{outbox_wake_notify}}(%s, %s)",
		Auto: func(ctx context.Context, f func(q sqlcore.Querier) error) error {
			return f(auto)
		},
		MarkSent: `UPDATE {{outbox}} SET state = 1, sent_at = $1 WHERE id = ANY($2::bigint[]) AND state <> 1`,
	}
}

// OutboxSource implements the relay's part (outbox's relayStore): the stream with
// SourceOptions.Stream, otherwise claims from the table (SKIP LOCKED, so
// that a relay holds Pipeline batches at once), woken by NOTIFY unless
// NoListen, standing by while the outbox's stream slot exists.
func (s *driver) OutboxSource(_ context.Context, c seam.SourceConfig) (seam.Source[outbox.Row], error) {
	if s.src.Stream {
		return s.streamSource(c, s.src), nil
	}
	return pollSource(s.Outbox, s, s.src, c, s.pollGuard), nil
}
