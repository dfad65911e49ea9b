package admin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/internal/names"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
)

// This file is the package's one way into a store: the store's part this
// package calls (storeOps, declared here as idem, outbox and keys declare
// theirs) and the backend the rest of the package calls, in the types a
// user sees. Nothing else in the package names the store.

// storeOps is what the package calls of a store's implementation: the
// operator's listings and changes, and the transaction unpark runs in.
type storeOps[Tx any] interface {
	Begin(ctx context.Context) (Tx, error)
	Commit(ctx context.Context, tx Tx) error
	Rollback(ctx context.Context, tx Tx) error

	ParkedConsumers(ctx context.Context) (map[string]int, error)
	ListParked(ctx context.Context, consumer string, f idem.ParkedFilter) ([]idem.Parked, error)
	CountParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error)
	DiscardParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error)
	DeleteParked(ctx context.Context, tx Tx, consumer string, id int64) (bool, error)
	Unclaim(ctx context.Context, tx Tx, consumer, messageID string) (bool, error)
	ListEarly(ctx context.Context, consumer string, limit int) ([]idem.EarlyAggregate, error)

	OutboxHealth(ctx context.Context, now time.Time) (outbox.Health, error)
	ListOutbox(ctx context.Context, f outbox.Filter) ([]outbox.Row, error)
	SetOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error)

	ListKeys(ctx context.Context, f keys.Filter) ([]keys.Record, error)
}

// streamStatuser is implemented by stores whose relays may stream the
// outbox from the database's log.
type streamStatuser interface {
	OutboxStreamStatus(ctx context.Context) (outbox.StreamStatus, error)
}

// backend is what the rest of the package calls, without transactions:
// storeOps, with unpark's transaction run here.
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
	listEarly(ctx context.Context, consumer string, limit int) ([]idem.EarlyAggregate, error)
	outboxHealth(ctx context.Context, now time.Time) (outbox.Health, error)
	listOutbox(ctx context.Context, f outbox.Filter) ([]outbox.Row, error)
	setOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error)
	// streamStatus is the outbox stream's slot; ok is false when the
	// store does not stream.
	streamStatus(ctx context.Context) (st outbox.StreamStatus, ok bool, err error)
	listKeys(ctx context.Context, f keys.Filter) ([]keys.Record, error)
}

// open returns the backend of p and, when p hands out its database
// (*postgres.Store's Pool, *postgres.SQLStore's or *sqlite.Store's DB), the database the audit
// table and the store's check go to (nil otherwise).
func open[Tx any](p idem.Store[Tx], schema, prefix string) (backend, *sqlDB, error) {
	if schema != "" {
		if err := names.ValidateIdentifier("schema name", schema); err != nil {
			return nil, nil, err
		}
	}
	if err := names.ValidatePrefix(prefix); err != nil {
		return nil, nil, err
	}
	ops, err := check.Part[storeOps[Tx]](p, "the operator's part")
	if err != nil {
		return nil, nil, err
	}
	db := &sqlDB{schema: schema, prefix: prefix}
	switch s := any(p).(type) {
	case interface{ Pool() *pgxpool.Pool }:
		db.pg = s.Pool()
	case interface{ DB() *sql.DB }:
		if _, ok := s.DB().Driver().(*stdlib.Driver); ok { // *postgres.SQLStore
			db.pgsql = s.DB()
			break
		}
		db.lite = s.DB()
		d, ok := p.Driver().Impl().(interface{ SQLDialect() string })
		db.my = ok && d.SQLDialect() == "mysql"
	default:
		db = nil
	}
	return storeDriver[Tx]{ops}, db, nil
}

type storeDriver[Tx any] struct{ d storeOps[Tx] }

func (s storeDriver[Tx]) parkedConsumers(ctx context.Context) (map[string]int, error) {
	return s.d.ParkedConsumers(ctx)
}

func (s storeDriver[Tx]) listParked(ctx context.Context, consumer string, f idem.ParkedFilter) ([]idem.Parked, error) {
	return s.d.ListParked(ctx, consumer, f)
}

func (s storeDriver[Tx]) countParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	return s.d.CountParked(ctx, consumer, f)
}

func (s storeDriver[Tx]) discardParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	return s.d.DiscardParked(ctx, consumer, f)
}

func (s storeDriver[Tx]) unpark(ctx context.Context, consumer string, ps []idem.Parked, publish func(context.Context) error) (err error) {
	tx, err := s.d.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil { // also when ctx is canceled: bounded instead
			rctx, cancel := seam.Detach(ctx)
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

func (s storeDriver[Tx]) listEarly(ctx context.Context, consumer string, limit int) ([]idem.EarlyAggregate, error) {
	return s.d.ListEarly(ctx, consumer, limit)
}

func (s storeDriver[Tx]) outboxHealth(ctx context.Context, now time.Time) (outbox.Health, error) {
	return s.d.OutboxHealth(ctx, now)
}

func (s storeDriver[Tx]) listOutbox(ctx context.Context, f outbox.Filter) ([]outbox.Row, error) {
	return s.d.ListOutbox(ctx, f)
}

func (s storeDriver[Tx]) setOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error) {
	return s.d.SetOutboxState(ctx, rowID, to, at, from...)
}

func (s storeDriver[Tx]) streamStatus(ctx context.Context) (outbox.StreamStatus, bool, error) {
	ss, ok := s.d.(streamStatuser)
	if !ok {
		return outbox.StreamStatus{}, false, nil
	}
	st, err := ss.OutboxStreamStatus(ctx)
	return st, err == nil, err
}

func (s storeDriver[Tx]) listKeys(ctx context.Context, f keys.Filter) ([]keys.Record, error) {
	return s.d.ListKeys(ctx, f)
}
