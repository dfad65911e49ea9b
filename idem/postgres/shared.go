package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// shared is what the store on a pgx pool (driver) and the store on a
// *sql.DB (sqlDriver) do alike beyond sqlcore's SQL: read the outbox
// stream's slot from the catalog, guard a polling relay against it,
// LISTEN on a connection of their own, and tell the conflicts the inbox
// retries. Its statements run outside any transaction (auto).
type shared struct {
	auto sqlcore.Querier
	// outbox and stream are the outbox's and the stream table's qualified
	// names, channel the outbox's NOTIFY channel.
	outbox, stream, channel string
	// config returns a copy of the connection configuration LISTEN
	// connects with.
	config func() *pgx.ConnConfig
	// slot is the outbox stream's slot name, once known (slotName).
	slot atomic.Pointer[string]
	// streamed, for the benchmarks (export_test.go's ObserveStream), is
	// called with each commit's rows as a streaming source receives them,
	// before its lanes.
	streamed atomic.Pointer[func([]outbox.Row)]
	// settleRetry, for the tests (export_test.go's BeforeSettleRetry), is
	// called before each of the stream's Settle looks again for rows it
	// did not find.
	settleRetry atomic.Pointer[func()]
}

func newShared[Tx any](auto sqlcore.Querier, o *sqlcore.Outbox[Tx], c *sqlcore.Core[Tx], config func() *pgx.ConnConfig) *shared {
	return &shared{auto: auto, outbox: c.Name("outbox"), stream: c.Name("outbox_stream"), channel: o.Channel(), config: config}
}

// isNoRows reports whether err is pgx's or database/sql's "no rows".
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) }

// pollSource is the relay's source that claims from the table (SKIP
// LOCKED, so that a relay holds Pipeline batches at once), woken by NOTIFY
// unless src.NoListen, standing by while the outbox's stream slot exists
// (guard).
func pollSource[Tx any](o *sqlcore.Outbox[Tx], ws wakeStore, src SourceOptions, c seam.SourceConfig, guard func(context.Context) error) seam.Source[outbox.Row] {
	var w sqlcore.Wake
	if !src.NoListen {
		// The wake-up lasts unless renewed: the source renews it each time
		// it wakes and finds nothing, at least every PollInterval, so only
		// a relay that stopped (or stalled that long) loses it.
		w = newWake(ws, c.Owner, 2*c.PollInterval+30*time.Second)
	}
	return o.PollSource(c, sqlcore.PollOptions{PerAggregate: src.PerAggregate, Pipeline: src.Pipeline, Wake: w, Guard: guard})
}

func (s *shared) slotName(ctx context.Context) (string, error) {
	if n := s.slot.Load(); n != nil {
		return *n, nil
	}
	var db, schema, table string
	err := s.auto.QueryRow(ctx, `SELECT current_database(), n.nspname, c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::regclass`, s.outbox).Scan(&db, &schema, &table)
	if err != nil {
		return "", fmt.Errorf("the outbox table: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte(db + "\x00" + schema + "\x00" + table))
	n := fmt.Sprintf("wary_outbox_%016x", h.Sum64())
	s.slot.Store(&n)
	return n, nil
}

// pollGuard fails with outbox.ErrOtherSource while the outbox's stream
// slot exists: a streaming relay publishes the outbox, or will resume from
// the slot and publish again what a polling relay claims meanwhile.
func (s *shared) pollGuard(ctx context.Context) error {
	slot, err := s.slotName(ctx)
	if err != nil {
		return err
	}
	var exists, active bool
	err = s.auto.QueryRow(ctx, `SELECT count(*) > 0, COALESCE(bool_or(active), FALSE) FROM pg_replication_slots WHERE slot_name = $1`, slot).
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

// ListenOutbox is sqlcore.Wake.Listen: it opens a dedicated
// connection (with the store's connection configuration), LISTENs on the outbox's
// channel, and calls notify once listening and then on every notification,
// until ctx is done (it returns nil) or the connection fails.
func (s *shared) ListenOutbox(ctx context.Context, notify func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.config())
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
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
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

// Conflict implements idem's conflicts: err is (or wraps) a deadlock's
// victim (40P01) or a serialization failure (40001), whether from the
// store's statements or from a handler's in the same transaction.
func (s *shared) Conflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// OutboxStreamStatus implements outbox's streamStatuser.
func (s *shared) OutboxStreamStatus(ctx context.Context) (outbox.StreamStatus, error) {
	slot, err := s.slotName(ctx)
	if err != nil {
		return outbox.StreamStatus{}, err
	}
	st := outbox.StreamStatus{Slot: slot, Publication: slot}
	var lagSec float64
	var walStatus *string
	err = s.auto.QueryRow(ctx, `SELECT s.active, s.wal_status,
			COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn), 0)::bigint,
			COALESCE(EXTRACT(EPOCH FROM r.flush_lag), 0)::float8
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, slot).Scan(&st.Active, &walStatus, &st.LagBytes, &lagSec)
	switch {
	case isNoRows(err):
	case err != nil:
		return st, err
	default:
		st.Exists = true
		if walStatus != nil {
			st.WALStatus = *walStatus
		}
		st.LagAge = time.Duration(lagSec * float64(time.Second))
	}
	var at *time.Time
	var lag *int64
	err = s.auto.QueryRow(ctx, `SELECT released, released_at, released_lag FROM `+s.stream+` WHERE slot = $1`, slot).
		Scan(&st.Released, &at, &lag)
	if err != nil && !isNoRows(err) {
		return st, err
	}
	if at != nil {
		st.ReleasedAt = *at
	}
	if lag != nil {
		st.ReleasedLag = *lag
	}
	return st, nil
}

// sharedPart is what both drivers take from shared: asserted here, since an
// embedded type of the drivers declaring one of these methods too would
// drop it from their method sets without a compile error.
type sharedPart interface {
	wakeStore
	OutboxStreamStatus(ctx context.Context) (outbox.StreamStatus, error)
	Conflict(err error) bool
}

var (
	_ sharedPart = (*driver)(nil)
	_ sharedPart = (*sqlDriver)(nil)
)
