package sqlcore

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/seam"
)

// The early events' statements (idem's earlyStore).
const (
	earlyHold = `INSERT INTO {{early}} (consumer, aggregate_id, version, message_id, msg_key, headers, body, held_at, awaited)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (consumer, aggregate_id, version) DO NOTHING`
	earlyOldest = `SELECT min(held_at) FROM {{early}} WHERE consumer = $1 AND aggregate_id = $2`
	earlyCols   = `aggregate_id, version, message_id, msg_key, headers, body, held_at`
	earlyOne    = ` WHERE consumer = $1 AND aggregate_id = $2 AND version = $3`
	earlyEvery  = ` WHERE consumer = $1 AND aggregate_id = $2`
	earlyOld    = `SELECT DISTINCT aggregate_id FROM {{early}} WHERE consumer = $1 AND held_at < $2 LIMIT $3`
	earlyCount  = `SELECT count(*) FROM {{early}} WHERE consumer = $1`
	// earlyList: the aggregates holding early events, oldest hold first
	// ($1: a consumer, or '' for all; $2: a limit).
	earlyList = `SELECT consumer, aggregate_id, max(awaited), min(version), max(version), count(*), min(held_at) FROM {{early}}
		WHERE $1 = '' OR consumer = $1 GROUP BY consumer, aggregate_id ORDER BY min(held_at), consumer, aggregate_id LIMIT $2`
)

// LockAggregate implements the early events' part (idem's earlyStore) with the dialect's Lock (none for
// a store whose transactions are serialised).
func (c *Core[Tx]) LockAggregate(ctx context.Context, tx Tx, consumer, aggregateID string) error {
	if c.aggregateLock() == "" {
		return nil
	}
	_, err := c.b.Q(tx).Exec(ctx, c.aggregateLock(), c.aggregateKey(consumer, aggregateID))
	return err
}

// LockAggregates implements the early events' part (idem's earlyStore): the keys of LockAggregate in
// ascending order (each once), with the dialect's LockMany in one
// statement where it has one.
func (c *Core[Tx]) LockAggregates(ctx context.Context, tx Tx, consumer string, aggregateIDs []string) error {
	if c.aggregateLock() == "" || len(aggregateIDs) == 0 {
		return nil
	}
	keys := make([]int64, len(aggregateIDs))
	for i, id := range aggregateIDs {
		keys[i] = c.aggregateKey(consumer, id)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) > 1 && c.d.LockMany != "" {
		_, err := c.b.Q(tx).Exec(ctx, c.d.LockMany, keys)
		return err
	}
	for _, k := range keys {
		if _, err := c.b.Q(tx).Exec(ctx, c.aggregateLock(), k); err != nil {
			return err
		}
	}
	return nil
}

// aggregateLock is the statement of the aggregate locks: the dialect's
// AggregateLock, or its Lock.
func (c *Core[Tx]) aggregateLock() string { return cmp.Or(c.d.AggregateLock, c.d.Lock) }

// aggregateKey is the key of the lock on (consumer, aggregateID).
func (c *Core[Tx]) aggregateKey(consumer, aggregateID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("wary-early:" + c.names["early"] + "\x00" + consumer + "\x00" + aggregateID))
	return int64(h.Sum64())
}

// HoldEarly implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) HoldEarly(ctx context.Context, tx Tx, e *seam.EarlyEvent) (bool, time.Time, error) {
	h, err := encodeHeaders(e.Headers)
	if err != nil {
		return false, time.Time{}, err
	}
	body := e.Body
	if body == nil {
		body = []byte{}
	}
	q := c.b.Q(tx)
	n, err := q.Exec(ctx, c.render(earlyHold), e.Consumer, e.AggregateID, e.Version, e.MessageID, e.Key, h, body, c.d.Time(e.HeldAt), e.Awaited)
	if err != nil {
		return false, time.Time{}, err
	}
	var oldest time.Time
	err = q.QueryRow(ctx, c.render(earlyOldest), e.Consumer, e.AggregateID).Scan(timeDest{&oldest})
	return n == 1, oldest, err
}

// TakeEarly implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) TakeEarly(ctx context.Context, tx Tx, consumer, aggregateID string, version int64) (*seam.EarlyEvent, error) {
	es, err := c.takeEarly(ctx, tx, earlyOne, consumer, aggregateID, version)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	return &es[0], nil
}

// TakeAllEarly implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) TakeAllEarly(ctx context.Context, tx Tx, consumer, aggregateID string) ([]seam.EarlyEvent, error) {
	es, err := c.takeEarly(ctx, tx, earlyEvery, consumer, aggregateID)
	for i := 1; i < len(es); i++ { // by version: RETURNING has no order
		for j := i; j > 0 && es[j].Version < es[j-1].Version; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	return es, err
}

// takeEarly deletes the early events that where selects and returns
// them: DELETE ... RETURNING or, without it (Dialect.NoReturning), a
// locking read of them, then the DELETE, which must delete as many (see
// takeEarlyPortable).
func (c *Core[Tx]) takeEarly(ctx context.Context, tx Tx, where, consumer string, args ...any) ([]seam.EarlyEvent, error) {
	args = append([]any{consumer}, args...)
	if c.d.NoReturning {
		return c.takeEarlyPortable(ctx, tx, where, args)
	}
	return c.readEarly(ctx, tx, c.render(`DELETE FROM {{early}}`+where+` RETURNING `+earlyCols), args)
}

// readEarly runs q, which returns early events' earlyCols, in tx.
func (c *Core[Tx]) readEarly(ctx context.Context, tx Tx, q string, args []any) ([]seam.EarlyEvent, error) {
	consumer := args[0].(string)
	rows, err := c.b.Q(tx).Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []seam.EarlyEvent
	for rows.Next() {
		e := seam.EarlyEvent{Consumer: consumer}
		var h string
		if err := rows.Scan(&e.AggregateID, &e.Version, &e.MessageID, &e.Key, &h, &e.Body, timeDest{&e.HeldAt}); err != nil {
			return nil, err
		}
		if e.Headers, err = decodeHeaders(h); err != nil {
			return nil, fmt.Errorf("early event %q: headers: %w", e.MessageID, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ExpiredEarly implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) ExpiredEarly(ctx context.Context, consumer string, before time.Time, limit int) ([]string, error) {
	var out []string
	err := c.inTx(ctx, func(q Querier) error {
		rows, err := q.Query(ctx, c.render(earlyOld), consumer, c.d.Time(before), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a string
			if err := rows.Scan(&a); err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// CountEarly implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) CountEarly(ctx context.Context, consumer string) (int, error) {
	var n int64
	err := c.inTx(ctx, func(q Querier) error { return q.QueryRow(ctx, c.render(earlyCount), consumer).Scan(&n) })
	return int(n), err
}

// ListEarly implements the operator's part.
func (c *Core[Tx]) ListEarly(ctx context.Context, consumer string, limit int) ([]idem.EarlyAggregate, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	out := []idem.EarlyAggregate{}
	err := c.inTx(ctx, func(q Querier) error {
		rows, err := q.Query(ctx, c.render(earlyList), consumer, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a idem.EarlyAggregate
			var n int64
			if err := rows.Scan(&a.Consumer, &a.AggregateID, &a.Awaited, &a.FirstVersion, &a.LastVersion, &n, timeDest{&a.OldestHeldAt}); err != nil {
				return err
			}
			a.Held = int(n)
			out = append(out, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list early events: %w", err)
	}
	return out, nil
}

// Savepoint implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) Savepoint(ctx context.Context, tx Tx) error {
	_, err := c.b.Q(tx).Exec(ctx, "SAVEPOINT wary_early")
	return err
}

// RollbackTo implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) RollbackTo(ctx context.Context, tx Tx) error {
	_, err := c.b.Q(tx).Exec(ctx, "ROLLBACK TO SAVEPOINT wary_early")
	return err
}

// Release implements the early events' part (idem's earlyStore).
func (c *Core[Tx]) Release(ctx context.Context, tx Tx) error {
	_, err := c.b.Q(tx).Exec(ctx, "RELEASE SAVEPOINT wary_early")
	return err
}
