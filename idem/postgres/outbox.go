package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
func outboxDialect(pool *pgxpool.Pool) sqlcore.OutboxDialect {
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
			return f(querier{pool})
		},
		MarkSent: `UPDATE {{outbox}} SET state = 1, sent_at = $1 WHERE id = ANY($2::bigint[]) AND state <> 1`,
	}
}

// ListenOutbox is sqlcore.Wake.Listen: it opens a dedicated
// connection (with the pool's configuration), LISTENs on the outbox's
// channel, and calls notify once listening and then on every notification,
// until ctx is done (it returns nil) or the connection fails.
func (s *driver) ListenOutbox(ctx context.Context, notify func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		cctx, cancel := seam.Detach(ctx)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.Outbox.Channel()}.Sanitize()); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	notify()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		notify()
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
	var w sqlcore.Wake
	if !s.src.NoListen {
		// The wake-up lasts unless renewed: the source renews it each time
		// it wakes and finds nothing, at least every PollInterval, so only
		// a relay that stopped (or stalled that long) loses it.
		w = newWake(s, c.Owner, 2*c.PollInterval+30*time.Second)
	}
	return s.Outbox.PollSource(c, sqlcore.PollOptions{PerAggregate: s.src.PerAggregate, Pipeline: s.src.Pipeline, Wake: w,
		Guard: s.pollGuard}), nil
}

// pollGuard fails with outbox.ErrOtherSource while the outbox's stream
// slot exists: a streaming relay publishes the outbox, or will resume from
// the slot and publish again what a polling relay claims meanwhile.
func (s *driver) pollGuard(ctx context.Context) error {
	slot, err := s.slotName(ctx)
	if err != nil {
		return err
	}
	var exists, active bool
	err = s.pool.QueryRow(ctx, `SELECT count(*) > 0, COALESCE(bool_or(active), FALSE) FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&exists, &active)
	switch {
	case err != nil:
		return err
	case active:
		return fmt.Errorf("%w: a relay streams the outbox from slot %s (set postgres.SourceOptions.Stream on this relay's store to stand by for it)",
			outbox.ErrOtherSource, slot)
	case exists:
		return fmt.Errorf("%w: the outbox's stream slot %s exists, and a streaming relay would publish again what this one claims "+
			"(stream with postgres.SourceOptions.Stream, or drop the slot to poll: SELECT pg_drop_replication_slot('%s'))",
			outbox.ErrOtherSource, slot, slot)
	}
	return nil
}
