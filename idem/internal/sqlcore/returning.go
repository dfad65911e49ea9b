package sqlcore

import (
	"context"
	"fmt"

	"github.com/wary-go/wary/idem/internal/seam"
)

// The portable forms of the statements that return what they wrote, for a
// database without INSERT ... RETURNING and DELETE ... RETURNING
// (Dialect.NoReturning: MySQL; MariaDB before 10.5). Each is two
// statements in the caller's transaction, run under READ COMMITTED:
//
//   - an upsert (a failure's record, the outbox's sequence counters),
//     then a plain read of the rows it wrote by their keys: the upsert
//     holds their locks until the transaction ends, and a transaction
//     reads its own changes, so the read sees exactly what it wrote;
//   - a DELETE (early events taken), preceded by a locking read of the
//     rows it is to delete (SELECT ... FOR UPDATE): locked, they stay as
//     read until the DELETE, which must then delete as many; more (a row
//     inserted between the two, which the aggregate lock held by the
//     caller rules out) fails with Dialect.Conflict and the transaction is
//     tried again;
//   - a shared transaction's claim (ClaimMany, with INSERT IGNORE), behind
//     a savepoint: if it inserted a row for each ID, they are all claimed;
//     if fewer (an ID claimed already, or by a transaction that committed
//     while the insert waited for its lock), the rows it inserted are not
//     told apart from the others', so it is rolled back to the savepoint
//     and the IDs are claimed one by one, each statement saying whether it
//     inserted (the claim of a single message). A locking read of the IDs
//     first would not do: under READ COMMITTED it locks no ID that is not
//     there yet, and another transaction can claim one between the read
//     and the insert.

// takeEarlyPortable takes the early events that where selects (see
// takeEarly) with a locking read, then a DELETE.
func (c *Core[Tx]) takeEarlyPortable(ctx context.Context, tx Tx, where string, args []any) ([]seam.EarlyEvent, error) {
	es, err := c.readEarly(ctx, tx, c.render(`SELECT `+earlyCols+` FROM {{early}}`+where+` FOR UPDATE`), args)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	n, err := c.b.Q(tx).Exec(ctx, c.render(`DELETE FROM {{early}}`+where), args...)
	if err != nil {
		return nil, err
	}
	if n != int64(len(es)) {
		return nil, fmt.Errorf("%w: take early events: %d deleted, %d read", c.d.Conflict, n, len(es))
	}
	return es, nil
}

// claimManyPortable claims list (ids, as Dialect.Array gives them) in tx
// with ClaimMany behind a savepoint and returns the set of those it
// claimed: all of them if it inserted as many rows as list has IDs;
// otherwise it rolls back to the savepoint and claims them one by one.
func (c *Core[Tx]) claimManyPortable(ctx context.Context, tx Tx, consumer string, list []string, ids any, at any) (map[string]bool, error) {
	q := c.b.Q(tx)
	got := make(map[string]bool, len(list))
	for _, id := range list {
		got[id] = true
	}
	if _, err := q.Exec(ctx, "SAVEPOINT wary_claim"); err != nil {
		return nil, err
	}
	n, err := q.Exec(ctx, c.q.claimMany, consumer, ids, at)
	if err != nil {
		return nil, err
	}
	if n == int64(len(got)) {
		return got, nil
	}
	// Some were claimed already, or by a transaction that committed
	// while the insert waited for its row lock: which of the rows are
	// this transaction's, the insert does not say.
	if _, err := q.Exec(ctx, "ROLLBACK TO SAVEPOINT wary_claim"); err != nil {
		return nil, err
	}
	done := make(map[string]bool, len(got))
	for _, id := range list { // in list's order, as the insert
		if done[id] {
			continue
		}
		done[id] = true
		n, err := q.Exec(ctx, c.q.claim, consumer, id, at)
		if err != nil {
			return nil, err
		}
		got[id] = n == 1
	}
	return got, nil
}
