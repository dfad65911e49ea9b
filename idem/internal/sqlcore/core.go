// Package sqlcore is the SQL shared by the PostgreSQL and SQLite stores of
// package idem. A store supplies a Backend (transactions and a query
// adapter) and a Dialect; Core implements the inbox's part (idem's inboxStore) on top of them.
package sqlcore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/names"
	"github.com/wary-go/wary/idem/internal/seam"
)

// Querier runs SQL in a transaction or on a pool. Queries are written with
// $1, $2, ... placeholders; the Dialect rewrites them.
type Querier interface {
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	QueryRow(ctx context.Context, q string, args ...any) Row
	Query(ctx context.Context, q string, args ...any) (Rows, error)
}

// Row is one result row.
type Row interface{ Scan(dest ...any) error }

// Rows is a result set.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Backend gives Core transactions.
type Backend[Tx any] interface {
	Begin(ctx context.Context) (Tx, error)
	Commit(ctx context.Context, tx Tx) error
	Rollback(ctx context.Context, tx Tx) error
	// Q adapts tx.
	Q(tx Tx) Querier
}

// Dialect is what differs between the databases.
type Dialect struct {
	// Rebind rewrites $N placeholders (nil: none needed).
	Rebind func(q string) string
	// Time converts a time to a query argument.
	Time func(time.Time) any
	// Quote quotes an identifier, qualified by schema when not empty.
	Quote func(schema, name string) string
	// IsNoRows reports whether err means that QueryRow found no row.
	IsNoRows func(err error) bool
	// CreateSchema, if not empty, is a format for the statement that
	// creates a schema given its quoted name, run by Migrate first when the
	// store has a schema.
	CreateSchema string
	// ClaimMany, if not empty, is the statement that claims many messages
	// at once: $1 the consumer, $2 the message IDs as an array, $3 the time;
	// it inserts them in the order of the IDs and returns the claimed ones.
	// Without it, Claim claims one by one.
	ClaimMany string
	// Array, if not nil, is how ClaimMany's $2 is sent, given the IDs;
	// false: it cannot hold them, and Claim claims one by one. Nil: the
	// IDs as they are (a driver that binds []string as an array).
	Array func(ids []string) (any, bool)
	// ClaimAll makes Claim use ClaimMany for a single message too (a
	// store whose uniqueness is in that statement, not in a unique index).
	ClaimAll bool
	// Purge, if not empty, replaces the inbox purge: $1 consumer, $2
	// before, $3 limit; it deletes at most limit records.
	Purge string
	// ClaimCheck, if not empty, is the statement that claims one message
	// and reports whether its aggregate has parked messages: $1 consumer,
	// $2 message ID, $3 time, $4 aggregate ID; it returns (claimed, held).
	// Without it, Claim claims, then looks for a parked message.
	ClaimCheck string
	// Lock, if not empty, is run with one int64 argument at the start of
	// the migration transaction to serialise migrators, and takes the
	// aggregate locks of idem's earlyStore (held until the transaction ends).
	Lock string
	// LockMany, if not empty, takes Lock's lock on each of the keys in its
	// one argument, an int64 array, in the array's order.
	LockMany string
	// AggregateLock, if not empty, replaces Lock for the aggregate locks
	// of idem's earlyStore: a store whose migrations cannot run in one
	// transaction (MySQL commits each DDL statement) serialises migrators
	// otherwise and leaves Lock empty.
	AggregateLock string
	// NoReturning: the database has no INSERT ... RETURNING or DELETE ...
	// RETURNING (MySQL; MariaDB before 10.5). The statements that return
	// what they wrote take their portable forms (see returning.go): an
	// upsert followed by a read of the rows it locked, a locking read
	// followed by the DELETE, and ClaimMany, which then returns nothing,
	// behind a savepoint.
	NoReturning bool
	// Conflict, with NoReturning, is what the portable forms wrap when
	// their check finds that a concurrent transaction wrote between their
	// two statements: an error the store's Conflict matches, so that the
	// inbox tries the transaction again.
	Conflict error
}

// Core implements the inbox's part (idem's inboxStore).
type Core[Tx any] struct {
	b      Backend[Tx]
	d      Dialect
	schema string
	names  map[string]string
	q      queries
	cache  sync.Map // idem.VersionTable or idem.StateTable -> [2]string
}

// Tables lists the table, index and function names built from the prefix
// (PostgreSQL's outbox_wake_notify, inbox_claim and outbox_slice_add are
// functions and outbox_slice_seq a sequence, schema-qualified like a
// table).
var Tables = []string{"inbox", "parked", "failures", "migrations", "inbox_processed_idx", "parked_aggregate_idx", "failures_seen_idx",
	"outbox", "outbox_aggregates", "relay_lease", "outbox_wake", "outbox_pending_idx", "outbox_unsent_idx", "outbox_sent_idx",
	"idempotency_keys", "keys_state_idx", "outbox_wake_notify", "inbox_slices", "inbox_slices_idx", "inbox_claim", "early", "early_held_idx",
	"outbox_slices", "outbox_slice_seq", "outbox_slice_add", "outbox_stream", "outbox_left_idx", "inbox_prev",
	"inbox_old", "outbox_prev", "outbox_rotated", "aggregate_locks"}

// New validates schema and prefix and builds Core.
func New[Tx any](b Backend[Tx], d Dialect, schema, prefix string) (*Core[Tx], error) {
	if schema != "" {
		if err := names.ValidateIdentifier("schema name", schema); err != nil {
			return nil, err
		}
	}
	if err := names.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if d.Rebind == nil {
		d.Rebind = func(q string) string { return q }
	}
	c := &Core[Tx]{b: b, d: d, schema: schema, names: map[string]string{}}
	for _, t := range Tables {
		if strings.HasSuffix(t, "_idx") {
			c.names[t] = d.Quote("", prefix+t) // index names are not schema-qualified
		} else {
			c.names[t] = d.Quote(schema, prefix+t)
		}
	}
	if d.NoReturning && d.Conflict == nil {
		return nil, fmt.Errorf("sqlcore: a dialect without RETURNING needs Conflict")
	}
	c.q = buildQueries(c.render, !d.NoReturning)
	if d.ClaimMany != "" {
		c.q.claimMany = c.render(d.ClaimMany)
	}
	if d.ClaimCheck != "" {
		c.q.claimCheck = c.render(d.ClaimCheck)
	}
	if d.Purge != "" {
		c.q.purge = c.render(d.Purge)
	}
	return c, nil
}

// render replaces {{name}} with quoted table and index names and rebinds
// placeholders.
func (c *Core[Tx]) render(q string) string {
	pairs := make([]string, 0, 2*len(c.names))
	for k, v := range c.names {
		pairs = append(pairs, "{{"+k+"}}", v)
	}
	return c.d.Rebind(strings.NewReplacer(pairs...).Replace(q))
}

// ClaimQueries returns the statements of a claim that Claim sends (one
// message, many, one with its held check; those the dialect has), for a
// store that prepares them once.
func (c *Core[Tx]) ClaimQueries() []string {
	out := []string{c.q.claim}
	for _, q := range []string{c.q.claimMany, c.q.claimCheck} {
		if q != "" {
			out = append(out, q)
		}
	}
	return out
}

// Name returns the quoted, qualified name of one of Tables.
func (c *Core[Tx]) Name(table string) string { return c.names[table] }

// Begin starts a transaction.
func (c *Core[Tx]) Begin(ctx context.Context) (Tx, error) { return c.b.Begin(ctx) }

// Commit commits tx.
func (c *Core[Tx]) Commit(ctx context.Context, tx Tx) error { return c.b.Commit(ctx, tx) }

// Rollback rolls tx back.
func (c *Core[Tx]) Rollback(ctx context.Context, tx Tx) error { return c.b.Rollback(ctx, tx) }

// inTx runs f in its own transaction.
func (c *Core[Tx]) inTx(ctx context.Context, f func(q Querier) error) error {
	tx, err := c.b.Begin(ctx)
	if err != nil {
		return err
	}
	if err := f(c.b.Q(tx)); err != nil {
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		_ = c.b.Rollback(rctx, tx)
		return err
	}
	return c.b.Commit(ctx, tx)
}

// Claim implements the inbox's part (idem's inboxStore): one statement for a single message (with
// its held check, given ClaimCheck), one for many (given ClaimMany) and
// then a held check per claimed message with an aggregate.
func (c *Core[Tx]) Claim(ctx context.Context, tx Tx, r seam.ClaimRequest) ([]seam.Claimed, error) {
	out := make([]seam.Claimed, len(r.IDs))
	agg := func(i int) string {
		if r.Aggregates == nil {
			return ""
		}
		return r.Aggregates[i]
	}
	at := c.d.Time(r.At)
	var ids any // ClaimMany's $2, where it claims them
	if (len(r.IDs) > 1 || c.d.ClaimAll) && c.q.claimMany != "" {
		ids = c.array(r.IDs)
	}
	switch {
	case len(r.IDs) == 1 && agg(0) != "" && c.q.claimCheck != "":
		var claimed, held bool
		err := c.b.Q(tx).QueryRow(ctx, c.q.claimCheck, r.Consumer, r.IDs[0], at, agg(0)).Scan(&claimed, &held)
		out[0] = seam.Claimed{New: claimed, Held: claimed && held}
		return out, err
	case ids != nil:
		got, err := c.claimMany(ctx, tx, r.Consumer, r.IDs, ids, at)
		if err != nil {
			return nil, err
		}
		for i, id := range r.IDs {
			out[i].New = got[id]
			delete(got, id) // a later copy in r is a duplicate
		}
	default:
		for i, id := range r.IDs {
			n, err := c.b.Q(tx).Exec(ctx, c.q.claim, r.Consumer, id, at)
			if err != nil {
				return nil, err
			}
			out[i].New = n == 1
		}
	}
	for i := range out {
		if out[i].New && agg(i) != "" {
			held, err := c.hasParked(ctx, tx, r.Consumer, agg(i))
			if err != nil {
				return nil, err
			}
			out[i].Held = held
		}
	}
	return out, nil
}

// BeginClaim implements the inbox's part (idem's inboxStore): Begin, then Claim.
func (c *Core[Tx]) BeginClaim(ctx context.Context, r seam.ClaimRequest) (tx Tx, began bool, claims []seam.Claimed, err error) {
	if tx, err = c.Begin(ctx); err != nil {
		return tx, false, nil, err
	}
	if claims, err = c.Claim(ctx, tx, r); err != nil {
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		_ = c.Rollback(rctx, tx)
		var zero Tx
		return zero, false, nil, err
	}
	return tx, true, claims, nil
}

// array is ids as ClaimMany's $2 (Dialect.Array), nil if the dialect
// cannot send them so.
func (c *Core[Tx]) array(ids []string) any {
	if c.d.Array == nil {
		return ids
	}
	if a, ok := c.d.Array(ids); ok {
		return a
	}
	return nil
}

// claimMany claims list (ids, as array gives them) in tx with the
// dialect's ClaimMany statement and returns the set of those it claimed.
func (c *Core[Tx]) claimMany(ctx context.Context, tx Tx, consumer string, list []string, ids any, at any) (map[string]bool, error) {
	if c.d.NoReturning {
		return c.claimManyPortable(ctx, tx, consumer, list, ids, at)
	}
	got := make(map[string]bool)
	rows, err := c.b.Q(tx).Query(ctx, c.q.claimMany, consumer, ids, at)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		got[id] = true
	}
	return got, rows.Err()
}

// Purge implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) Purge(ctx context.Context, consumer string, before time.Time, limit int) (int, error) {
	var n int64
	err := c.inTx(ctx, func(q Querier) error {
		var err error
		if n, err = q.Exec(ctx, c.q.purge, consumer, c.d.Time(before), limit); err != nil {
			return err
		}
		_, err = q.Exec(ctx, c.q.purgeFailures, consumer, c.d.Time(before), limit)
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// RecordFailure implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) RecordFailure(ctx context.Context, consumer, messageID, reason string, at time.Time) (int, time.Time, error) {
	var attempts int
	var first time.Time
	err := c.inTx(ctx, func(q Querier) error {
		if c.d.NoReturning {
			// The upsert locks the row until the transaction ends: the
			// read that follows sees what it wrote.
			if _, err := q.Exec(ctx, c.q.recordFailure, consumer, messageID, c.d.Time(at), reason); err != nil {
				return err
			}
			return q.QueryRow(ctx, c.q.failureRead, consumer, messageID).Scan(&attempts, timeDest{&first})
		}
		return q.QueryRow(ctx, c.q.recordFailure, consumer, messageID, c.d.Time(at), reason).Scan(&attempts, timeDest{&first})
	})
	return attempts, first, err
}

// ClearFailure implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) ClearFailure(ctx context.Context, tx Tx, consumer, messageID string) error {
	_, err := c.b.Q(tx).Exec(ctx, c.q.clearFailure, consumer, messageID)
	return err
}

// hasParked reports, in tx, whether consumer has a parked message of
// aggregateID.
func (c *Core[Tx]) hasParked(ctx context.Context, tx Tx, consumer, aggregateID string) (bool, error) {
	var n int64
	err := c.b.Q(tx).QueryRow(ctx, c.q.hasParked, consumer, aggregateID).Scan(&n)
	if c.d.IsNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// Park implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) Park(ctx context.Context, tx Tx, p *idem.Parked) error {
	h, err := encodeHeaders(p.Headers)
	if err != nil {
		return err
	}
	body := p.Body
	if body == nil {
		body = []byte{}
	}
	_, err = c.b.Q(tx).Exec(ctx, c.q.park, p.Consumer, p.MessageID, p.AggregateID, p.Version, p.Sequence, p.Key,
		h, body, p.Reason, p.Attempts, c.d.Time(p.FirstSeen), c.d.Time(p.LastSeen))
	return err
}

func parkedWhere(f idem.ParkedFilter, args []any) (string, []any) {
	var w strings.Builder
	w.WriteString(" WHERE consumer = $1")
	if f.HasAggregate {
		w.WriteString(" AND aggregate_id = " + bind(&args, f.AggregateID))
	}
	if f.HasAfter {
		w.WriteString(" AND aggregate_id > " + bind(&args, f.AfterAggregate))
	}
	if f.ID != 0 {
		w.WriteString(" AND id = " + bind(&args, f.ID))
	}
	return w.String(), args
}

// ListParked implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) ListParked(ctx context.Context, consumer string, f idem.ParkedFilter) ([]idem.Parked, error) {
	where, args := parkedWhere(f, []any{consumer})
	q := c.q.listParked
	if f.NoBody {
		q = c.q.listParkedNoBody
	}
	q += where + " ORDER BY aggregate_id, version, sequence, id"
	if f.Limit > 0 {
		q += " LIMIT " + bind(&args, f.Limit)
	}
	var out []idem.Parked
	err := c.inTx(ctx, func(qr Querier) error {
		rows, err := qr.Query(ctx, c.d.Rebind(q), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p := idem.Parked{Consumer: consumer}
			var h string
			if err := rows.Scan(&p.ID, &p.MessageID, &p.AggregateID, &p.Version, &p.Sequence, &p.Key, &h, &p.Body,
				&p.Reason, &p.Attempts, timeDest{&p.FirstSeen}, timeDest{&p.LastSeen}); err != nil {
				return err
			}
			if p.Headers, err = decodeHeaders(h); err != nil {
				return fmt.Errorf("parked message %d: headers: %w", p.ID, err)
			}
			out = append(out, p)
		}
		return rows.Err()
	})
	return out, err
}

// CountParked implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) CountParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	where, args := parkedWhere(f, []any{consumer})
	var n int64
	err := c.inTx(ctx, func(q Querier) error {
		return q.QueryRow(ctx, c.render("SELECT count(*) FROM {{parked}}"+where), args...).Scan(&n)
	})
	return int(n), err
}

// DeleteParked implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) DeleteParked(ctx context.Context, tx Tx, consumer string, id int64) (bool, error) {
	n, err := c.b.Q(tx).Exec(ctx, c.q.deleteParked, consumer, id)
	return n == 1, err
}

// UpdateParked implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) UpdateParked(ctx context.Context, consumer string, id int64, reason string, at time.Time) error {
	return c.inTx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, c.q.updateParked, consumer, id, reason, c.d.Time(at))
		return err
	})
}

// DiscardParked implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) DiscardParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	where, args := parkedWhere(f, []any{consumer})
	var n int64
	err := c.inTx(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, c.render("DELETE FROM {{parked}}"+where), args...)
		return err
	})
	return int(n), err
}

// timeDest scans a time stored as a timestamp or as Unix microseconds.
type timeDest struct{ t *time.Time }

func (d timeDest) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*d.t = v
	case int64:
		*d.t = time.UnixMicro(v)
	default:
		return fmt.Errorf("idem: cannot scan %T as a time", src)
	}
	return nil
}
