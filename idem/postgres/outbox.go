package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/store"
)

// The outbox on PostgreSQL: relays claim rows with FOR UPDATE SKIP LOCKED
// in a transaction they hold while publishing. An adding transaction sends
// a NOTIFY only while a relay waits for one (the wake flag is set): the
// commits of notifying transactions are serialised, so while relays are
// busy they poll instead. Before reading the flag, the adding transaction
// takes a shared advisory lock that a relay going idle must get
// exclusively (Store.IdleOutbox), so that no transaction that read the
// flag unset commits after the relay's last look.
var outboxDialect = sqlcore.OutboxDialect{
	SkipLocked: true,
	Notify:     "SELECT pg_notify($1, '') FROM {{outbox_wake}} WHERE name = 'outbox' AND idle",
	WakeShared: "SELECT pg_advisory_xact_lock_shared($1)",
	WakeTry:    "SELECT pg_try_advisory_xact_lock($1)",
}

var _ store.OutboxListener = (*Store)(nil)

// ListenOutbox implements store.OutboxListener: it opens a dedicated
// connection (with the pool's configuration), LISTENs on the outbox's
// channel, and calls notify once listening and then on every notification,
// until ctx is done (it returns nil) or the connection fails.
func (s *Store) ListenOutbox(ctx context.Context, notify func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.outbox.Channel()}.Sanitize()); err != nil {
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

var _ store.ConcurrentClaimer = (*Store)(nil)

// ConcurrentClaims implements store.ConcurrentClaimer: claims lock their
// heads, so a relay may hold several batches at once.
func (s *Store) ConcurrentClaims() bool { return true }

var _ store.OutboxIdler = (*Store)(nil)

// IdleOutbox implements store.OutboxIdler.
func (s *Store) IdleOutbox(ctx context.Context) (bool, error) { return s.outbox.IdleOutbox(ctx) }

// BusyOutbox implements store.OutboxIdler.
func (s *Store) BusyOutbox(ctx context.Context) error { return s.outbox.BusyOutbox(ctx) }
