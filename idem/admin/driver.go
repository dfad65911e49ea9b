package admin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/store"
)

// This file is the package's one way into a store: the provider New takes,
// the small interface the rest of the package calls (backend), and the
// conversions between the store's types and the ones a user sees (idem's,
// outbox's, keys' and this package's own). Nothing else in the package
// names the store's interface.

// provider is what New takes: *postgres.Store or *sqlite.Store (or a
// wrapper of one).
type provider[Tx any] interface {
	Driver() store.Driver[Tx]
}

// backend is what the package needs of a store, in the users' types and
// without transactions but unpark's, which is the store's.
type backend interface {
	parkedConsumers(ctx context.Context) (map[string]int, error)
	listParked(ctx context.Context, consumer string, f idem.ParkedFilter) ([]idem.Parked, error)
	countParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error)
	discardParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error)
	// unpark deletes ps from consumer's park and forgets their inbox
	// claims, in one transaction; calls publish; and commits only if
	// publish succeeded: a message is never both gone from the park and
	// not sent.
	unpark(ctx context.Context, consumer string, ps []idem.Parked, publish func(context.Context) error) error
	listEarly(ctx context.Context, consumer string, limit int) ([]EarlyAggregate, error)
	outboxHealth(ctx context.Context, now time.Time) (outbox.Health, error)
	listOutbox(ctx context.Context, f OutboxFilter) ([]outbox.Row, error)
	setOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error)
	// streamStatus is the outbox stream's slot; ok is false when the
	// store does not stream.
	streamStatus(ctx context.Context) (st StreamStatus, ok bool, err error)
	listKeys(ctx context.Context, f KeyFilter) ([]keys.Record, error)
}

// open returns the backend of p and, when p hands out its database
// (*postgres.Store's Pool, *sqlite.Store's DB), the database the audit
// table and the store's check go to (nil otherwise).
func open[Tx any](p provider[Tx], schema, prefix string) (backend, *sqlDB, error) {
	if schema != "" {
		if err := store.ValidateIdentifier("schema name", schema); err != nil {
			return nil, nil, err
		}
	}
	if err := store.ValidatePrefix(prefix); err != nil {
		return nil, nil, err
	}
	d := storeDriver[Tx]{p.Driver()}
	db := &sqlDB{schema: schema, prefix: prefix}
	switch s := any(p).(type) {
	case interface{ Pool() *pgxpool.Pool }:
		db.pg = s.Pool()
	case interface{ DB() *sql.DB }:
		db.lite = s.DB()
	default:
		db = nil
	}
	return d, db, nil
}

type storeDriver[Tx any] struct{ d store.Driver[Tx] }

// rollbackTimeout bounds unpark's rollback, which outlives the caller's
// cancellation.
const rollbackTimeout = 10 * time.Second

func (s storeDriver[Tx]) parkedConsumers(ctx context.Context) (map[string]int, error) {
	return s.d.ParkedConsumers(ctx)
}

func (s storeDriver[Tx]) listParked(ctx context.Context, consumer string, f idem.ParkedFilter) ([]idem.Parked, error) {
	ps, err := s.d.ListParked(ctx, consumer, store.ParkedFilter(f))
	out := make([]idem.Parked, len(ps))
	for i, p := range ps {
		out[i] = idem.Parked(p)
	}
	return out, err
}

func (s storeDriver[Tx]) countParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	return s.d.CountParked(ctx, consumer, store.ParkedFilter(f))
}

func (s storeDriver[Tx]) discardParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	return s.d.DiscardParked(ctx, consumer, store.ParkedFilter(f))
}

func (s storeDriver[Tx]) unpark(ctx context.Context, consumer string, ps []idem.Parked, publish func(context.Context) error) (err error) {
	tx, err := s.d.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil { // also when ctx is canceled: bounded instead
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_ = s.d.Rollback(rctx, tx)
		}
	}()
	for _, p := range ps {
		ok, err := s.d.DeleteParked(ctx, tx, consumer, p.ID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("parked message %d (%s) is gone: replayed or discarded meanwhile", p.ID, p.MessageID)
		}
		if _, err := s.d.Unclaim(ctx, tx, consumer, p.MessageID); err != nil {
			return err
		}
	}
	if err := publish(ctx); err != nil {
		return err
	}
	return s.d.Commit(ctx, tx)
}

func (s storeDriver[Tx]) listEarly(ctx context.Context, consumer string, limit int) ([]EarlyAggregate, error) {
	es, err := s.d.ListEarly(ctx, consumer, limit)
	out := make([]EarlyAggregate, len(es))
	for i, e := range es {
		out[i] = EarlyAggregate(e)
	}
	return out, err
}

func (s storeDriver[Tx]) outboxHealth(ctx context.Context, now time.Time) (outbox.Health, error) {
	h, err := s.d.OutboxHealth(ctx, now)
	return outbox.Health(h), err
}

func (s storeDriver[Tx]) listOutbox(ctx context.Context, f OutboxFilter) ([]outbox.Row, error) {
	sf := store.OutboxFilter{AggregateID: f.AggregateID, AfterRow: f.AfterRow, Limit: f.Limit, NoPayload: f.NoPayload}
	for _, st := range f.States {
		sf.States = append(sf.States, store.OutboxState(st))
	}
	rs, err := s.d.ListOutbox(ctx, sf)
	out := make([]outbox.Row, len(rs))
	for i, r := range rs {
		out[i] = outbox.Row{Message: outbox.Message(r.OutboxMessage), RowID: r.RowID, Sequence: r.Sequence,
			State: outbox.State(r.State), CreatedAt: r.CreatedAt, Attempts: r.Attempts, NextAttempt: r.NextAttempt,
			LastError: r.LastError, SentAt: r.SentAt}
	}
	return out, err
}

func (s storeDriver[Tx]) setOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error) {
	sf := make([]store.OutboxState, len(from))
	for i, st := range from {
		sf[i] = store.OutboxState(st)
	}
	return s.d.SetOutboxState(ctx, rowID, store.OutboxState(to), at, sf...)
}

func (s storeDriver[Tx]) streamStatus(ctx context.Context) (StreamStatus, bool, error) {
	ss, ok := s.d.(store.StreamStatuser)
	if !ok {
		return StreamStatus{}, false, nil
	}
	st, err := ss.OutboxStreamStatus(ctx)
	return StreamStatus(st), err == nil, err
}

func (s storeDriver[Tx]) listKeys(ctx context.Context, f KeyFilter) ([]keys.Record, error) {
	sf := store.KeyFilter{Provider: f.Provider, Unresolved: f.Unresolved, At: f.At, Limit: f.Limit}
	for _, st := range f.States {
		sf.States = append(sf.States, store.KeyState(st))
	}
	rs, err := s.d.ListKeys(ctx, sf)
	out := make([]keys.Record, len(rs))
	for i, r := range rs {
		out[i] = keys.Record{Provider: r.Provider, Key: r.Key, Intent: r.Intent, State: keys.State(r.State), Result: r.Result,
			Error: r.Error, Attempts: r.Attempts, CreatedAt: r.CreatedAt, FirstCallAt: r.FirstCallAt,
			LastCallAt: r.LastCallAt, LeaseUntil: r.LeaseUntil, DoneAt: r.DoneAt}
	}
	return out, err
}
