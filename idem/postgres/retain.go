package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/store"
)

var _ store.Expirer = (*driver)(nil)

// slicesAhead is how many slices Expire keeps created ahead of the claims.
const slicesAhead = 2

// detachWait bounds how long a purge waits for the transactions that may
// still see a retired slice.
const detachWait = 5 * time.Second

// Expire implements [store.Expirer]: it deletes, in batches of at most
// limit, the records of slice 0 (the records of consumers without slices)
// claimed before now-retention and the failure records last seen before
// it, as Purge does. With Options.InboxSlice it then retires the
// consumer's slices whose end is at or before now-retention (claims stop
// looking in them), counts their records, detaches them from the inbox
// concurrently and drops them, and creates the slices that take the claims
// of the next slicesAhead×InboxSlice. It returns the records deleted and
// retired. One process at a time maintains a consumer's slices: another
// one's Expire skips them.
func (s *driver) Expire(ctx context.Context, consumer string, now time.Time, retention time.Duration, limit int) (int, error) {
	before := now.Add(-retention)
	n, err := s.Core.Purge(ctx, consumer, before, limit)
	if err != nil || s.slice <= 0 {
		return n, err
	}
	m, err := s.rotate(ctx, consumer, now, before)
	return n + m, err
}

// rotate maintains consumer's slices on one connection that holds a
// session advisory lock for the consumer while it works.
func (s *driver) rotate(ctx context.Context, consumer string, now, before time.Time) (int, error) {
	return s.maintain(ctx, s.Name("inbox_slices"), consumer, func(conn *pgxpool.Conn) (int, error) {
		var retired int
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var err error
			if retired, err = s.retire(ctx, tx, consumer, before); err != nil {
				return err
			}
			return s.create(ctx, tx, consumer, now)
		})
		if err != nil {
			return 0, fmt.Errorf("idem/postgres: inbox slices of %q: %w", consumer, err)
		}
		if err := s.drop(ctx, conn, consumer); err != nil {
			return retired, fmt.Errorf("idem/postgres: dropping inbox slices of %q: %w", consumer, err)
		}
		return retired, nil
	})
}

// maintain runs f on one connection that holds the session advisory lock
// (hashtext(catalog), hashtext(key)) while f runs: one process at a time
// maintains a set of slices. If another session holds the lock, maintain
// returns 0 and nil without running f.
func (s *driver) maintain(ctx context.Context, catalog, key string, f func(conn *pgxpool.Conn) (int, error)) (int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var mine bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))", catalog, key).Scan(&mine); err != nil {
		return 0, err
	}
	if !mine {
		return 0, nil
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1), hashtext($2))", catalog, key); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx)) // the session ends, and its lock with it
		}
	}()
	return f(conn)
}

// retire marks consumer's slices that end at or before before retired, in
// tx, and returns how many records they hold.
func (s *driver) retire(ctx context.Context, tx pgx.Tx, consumer string, before time.Time) (int, error) {
	rows, err := tx.Query(ctx, "UPDATE "+s.Name("inbox_slices")+" SET retired = TRUE WHERE consumer = $1 AND hi <= $2 AND NOT retired RETURNING id",
		consumer, before)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, err
	}
	total := 0
	for _, id := range ids {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+s.partName(s.inbox, id)).Scan(&n); err != nil {
			return 0, err
		}
		total += int(n)
	}
	return total, nil
}

// create creates, in tx, consumer's slices from the end of its last one
// (or from the next slice boundary after now) until now plus slicesAhead
// slices, each a table attached to the inbox.
func (s *driver) create(ctx context.Context, tx pgx.Tx, consumer string, now time.Time) error {
	var last *time.Time
	if err := tx.QueryRow(ctx, "SELECT max(hi) FROM "+s.Name("inbox_slices")+" WHERE consumer = $1", consumer).Scan(&last); err != nil {
		return err
	}
	lo := now.Truncate(s.slice).Add(s.slice)
	if last != nil && last.After(now) {
		lo = *last
	}
	for end := now.Add(slicesAhead * s.slice); lo.Before(end); lo = lo.Add(s.slice) {
		var id int64
		if err := tx.QueryRow(ctx, "INSERT INTO "+s.Name("inbox_slices")+" (consumer, lo, hi) VALUES ($1, $2, $3) RETURNING id",
			consumer, lo, lo.Add(s.slice)).Scan(&id); err != nil {
			return err
		}
		name, v := s.partName(s.inbox, id), strconv.FormatInt(id, 10)
		if _, err := tx.Exec(ctx, "CREATE TABLE "+name+` (consumer TEXT NOT NULL, message_id TEXT NOT NULL,
			processed_at TIMESTAMPTZ NOT NULL, slice BIGINT NOT NULL CHECK (slice = `+v+`), PRIMARY KEY (consumer, message_id))`); err != nil {
			return err
		}
		// ATTACH takes SHARE UPDATE EXCLUSIVE on the inbox: claims go on.
		if _, err := tx.Exec(ctx, "ALTER TABLE "+s.Name("inbox")+" ATTACH PARTITION "+name+" FOR VALUES IN ("+v+")"); err != nil {
			return err
		}
	}
	return nil
}

// drop detaches consumer's retired slices from the inbox and drops them,
// on conn, outside a transaction: DETACH PARTITION CONCURRENTLY waits for
// the transactions that may still see a slice (a claim that read the
// slices before it was retired) without blocking the claims, and a
// detach that a crash interrupted is finished (FINALIZE).
func (s *driver) drop(ctx context.Context, conn *pgxpool.Conn, consumer string) error {
	return withDetachWait(ctx, conn, func() error {
		list, err := retiredSlices(ctx, conn, `SELECT s.id, i.inhdetachpending FROM `+s.Name("inbox_slices")+` s
			LEFT JOIN pg_inherits i ON i.inhrelid = to_regclass($2 || s.id || '"') WHERE s.consumer = $1 AND s.retired ORDER BY s.id`,
			consumer, s.partPrefix(s.inbox))
		if err != nil {
			return err
		}
		for _, r := range list {
			name := s.partName(s.inbox, r.id)
			if err := detach(ctx, conn, s.Name("inbox"), name, r.pending); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, "DELETE FROM "+s.Name("inbox_slices")+" WHERE id = $1", r.id); err != nil {
				return err
			}
		}
		return nil
	})
}

// withDetachWait runs f on conn with lock_timeout detachWait. Detaching
// waits for every older transaction of the database; a purge runs in a
// delivery's Handle call or a relay's loop, so it waits at most
// detachWait, and a later purge finishes the detach.
func withDetachWait(ctx context.Context, conn *pgxpool.Conn, f func() error) (err error) {
	if _, err := conn.Exec(ctx, "SET lock_timeout = "+strconv.FormatInt(detachWait.Milliseconds(), 10)); err != nil {
		return err
	}
	defer func() {
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), "RESET lock_timeout"); rerr != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx)) // no other user gets its lock_timeout
			if err == nil {
				err = rerr
			}
		}
	}()
	return f()
}

// retiredSlice is a retired slice and whether its detach is pending
// (nil: detached already).
type retiredSlice struct {
	id      int64
	pending *bool
}

// retiredSlices runs query, which lists retired slices and their
// pg_inherits.inhdetachpending.
func retiredSlices(ctx context.Context, conn *pgxpool.Conn, query string, args ...any) ([]retiredSlice, error) {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (retiredSlice, error) {
		var x retiredSlice
		return x, r.Scan(&x.id, &x.pending)
	})
}

// detach detaches table name from parent concurrently, or finishes a
// pending detach (pending nil: detached already).
func detach(ctx context.Context, conn *pgxpool.Conn, parent, name string, pending *bool) error {
	var err error
	switch {
	case pending == nil:
	case *pending:
		_, err = conn.Exec(ctx, "ALTER TABLE "+parent+" DETACH PARTITION "+name+" FINALIZE")
	default:
		_, err = conn.Exec(ctx, "ALTER TABLE "+parent+" DETACH PARTITION "+name+" CONCURRENTLY")
	}
	return err
}

// partName is the quoted, qualified name of table's slice id.
func (s *driver) partName(table string, id int64) string {
	n := table + "_s" + strconv.FormatInt(id, 10)
	if s.schema == "" {
		return pgx.Identifier{n}.Sanitize()
	}
	return pgx.Identifier{s.schema, n}.Sanitize()
}

// partPrefix is the text that, followed by a slice's ID and a double
// quote, names a slice of table for to_regclass.
func (s *driver) partPrefix(table string) string {
	q := s.partName(table, 0)
	return q[:len(q)-len(`0"`)]
}
