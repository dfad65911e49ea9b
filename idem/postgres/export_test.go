package postgres

import (
	"context"
	"strconv"
	"strings"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// Classify is classify, for the tests.
var Classify = classify

// OutboxChannel is the store's notification channel, for the tests.
func OutboxChannel(s *Store) string { return s.d.Outbox.Channel() }

// NoWake makes s's adding transactions run no wake-up at all (no advisory
// lock, no flag, no NOTIFY), for the benchmarks: one statement each.
func NoWake(s *Store) {
	s.d.Outbox = sqlcore.NewOutbox(s.d.Core, sqlcore.OutboxDialect{SkipLocked: true, OneStatementAdd: true})
}

// TwoStatementAdd makes s's adding transactions run the two statements of
// earlier versions (the counters with the wake lock, then the rows with
// the wake-up), for the tests and benchmarks.
func TwoStatementAdd(s *Store) {
	d := outboxDialect(querier{s.d.pool})
	d.OneStatementAdd, d.WakeNotify = false, ""
	s.d.Outbox = sqlcore.NewOutbox(s.d.Core, d)
}

// WakeKey is the advisory lock key of s's wake flags.
func WakeKey(s *Store) int64 { return s.d.Outbox.WakeKey() }

// NoWakeTwoStatements is NoWake with the two statements per add of earlier
// versions, for the benchmarks.
func NoWakeTwoStatements(s *Store) {
	s.d.Outbox = sqlcore.NewOutbox(s.d.Core, sqlcore.OutboxDialect{SkipLocked: true})
}

// CommitHeld runs stmts in a relay batch's held transaction on pool and
// commits it the way a batch's mark does.
func CommitHeld(ctx context.Context, pool *pgxpool.Pool, stmts ...string) error {
	h, err := backend{pool}.Hold(ctx)
	if err != nil {
		return err
	}
	var ss []sqlcore.Stmt
	for _, s := range stmts {
		ss = append(ss, sqlcore.Stmt{SQL: s})
	}
	return h.CommitWith(ctx, ss)
}

// NewWake is the relay wake-up on s, for tests whose store wrappers count
// or refuse its calls.
func NewWake(s wakeStore, owner string, ttl time.Duration) sqlcore.Wake {
	return newWake(s, owner, ttl)
}

// MigrateBefore applies s's migrations numbered below v only: the schema
// of an earlier version, for the migration tests.
func MigrateBefore(ctx context.Context, s *Store, v int) error {
	fsys := fstest.MapFS{}
	entries, err := migrations.ReadDir("sql")
	if err != nil {
		return err
	}
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		if n, _ := strconv.Atoi(num); n < v {
			b, err := migrations.ReadFile("sql/" + e.Name())
			if err != nil {
				return err
			}
			fsys["sql/"+e.Name()] = &fstest.MapFile{Data: b}
		}
	}
	return s.d.Core.Migrate(ctx, fsys, "sql")
}

// Expire is the store's Expire, for the tests and benchmarks.
func Expire(ctx context.Context, s *Store, consumer string, now time.Time, retention time.Duration) (int, error) {
	return s.d.Expire(ctx, consumer, now, retention, 1000)
}

// RotateOutbox rotates s's outbox at now if it is due, the previous
// table's rows all sent before before, as a purge does, for the tests.
func RotateOutbox(ctx context.Context, s *Store, now, before time.Time) (int, error) {
	return s.d.rotateOutbox(ctx, now, before, 1000)
}

// hooked is a store whose relays' polling source wakes through w and
// claims through claim.
type hooked struct {
	*driver
	w     wakeStore
	claim func(context.Context, sqlcore.Claim) (sqlcore.Batch, error)
}

func (h hooked) Driver() seam.Driver[pgx.Tx] { return seam.NewDriver[pgx.Tx](h) }

func (h hooked) OutboxSource(_ context.Context, c seam.SourceConfig) (seam.Source[outbox.Row], error) {
	return h.Outbox.PollSource(c, sqlcore.PollOptions{PerAggregate: h.src.PerAggregate, Pipeline: h.src.Pipeline,
		Wake: newWake(h.w, c.Owner, 2*c.PollInterval+30*time.Second), Claim: h.claim}), nil
}

// Hooked returns s with source settings o, whose relays' polling source
// uses w's wake flag and LISTEN and claims through claim (nil: the
// store's), for tests whose wrappers count or refuse those calls.
func Hooked(s *Store, o SourceOptions, w wakeStore, claim func(context.Context, sqlcore.Claim) (sqlcore.Batch, error)) (idem.Store[pgx.Tx], error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	ws, err := s.WithSource(o)
	if err != nil {
		return nil, err
	}
	return hooked{driver: ws.d, w: w, claim: claim}, nil
}

// ClaimOutbox claims from s's outbox, for the tests.
func ClaimOutbox(ctx context.Context, s *Store, c sqlcore.Claim) (sqlcore.Batch, error) {
	return s.d.Outbox.ClaimOutbox(ctx, c)
}

// LogStream is the outbox stream a streaming source reads, for the tests.
type LogStream = logStream

// OpenStream opens s's outbox stream for owner, for the tests.
func OpenStream(ctx context.Context, s *Store, owner string) (LogStream, error) {
	return s.d.openStream(ctx, owner)
}

// OpenDriverStream opens the outbox stream of the store whose driver is d,
// for the benchmarks.
func OpenDriverStream(ctx context.Context, d any, owner string) (LogStream, error) {
	return d.(*driver).openStream(ctx, owner)
}

// ListenConfig is the configuration s's relays LISTEN with.
func ListenConfig(s *SQLStore) *pgx.ConnConfig { return s.d.config() }

// ObserveStream makes f see each commit's rows as the streaming sources
// of s (and of the stores WithSource makes of it) receive them, before
// their lanes: for the latency benchmark's stages. Nil stops it.
func ObserveStream(s *Store, f func([]outbox.Row)) {
	if f == nil {
		s.d.streamed.Store(nil)
		return
	}
	s.d.streamed.Store(&f)
}

// TableStream is an outbox stream of s with no connection to the server's
// log: its work on the table only (Settle, Publishable, Clear).
func TableStream(s *Store) LogStream { return &stream{d: s.d} }

// BeforeSettleRetry makes f run before each time a stream's Settle looks
// again for rows it did not find. Nil stops it.
func BeforeSettleRetry(s *Store, f func()) {
	if f == nil {
		s.d.settleRetry.Store(nil)
		return
	}
	s.d.settleRetry.Store(&f)
}
