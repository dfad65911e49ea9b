package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The outbox's slices (migration 010, docs/retention.md): the rows added
// while a slice is current go to it; the relay's purge (PurgeOutbox)
// rotates them.

// sliceReady is how long a slice created ahead waits before it may become
// current: an add whose statement began before the slice was attached
// routes its rows with the partitions it saw then, so it must have ended
// before the slice becomes current.
const sliceReady = time.Minute

// PurgeOutbox implements store.RelayStore. It deletes, in one transaction
// of at most limit rows, sent and discarded rows of slice 0 (rows added
// before migration 010) older than before. Without Options.OutboxSlice it
// deletes them in every slice, as before 010. With it, once slice 0 has
// fewer than limit such rows left, it rotates the slices (rotateOutbox)
// and adds the rows of the slices it dropped to its count.
func (s *driver) PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error) {
	if s.outboxSlice <= 0 {
		return s.Outbox.PurgeOutbox(ctx, before, limit)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM "+s.Name("outbox")+" WHERE slice = 0 AND id IN (SELECT id FROM "+s.Name("outbox")+
		" WHERE slice = 0 AND state IN (1, 3) AND sent_at < $1 LIMIT $2)", before, limit)
	n := int(tag.RowsAffected())
	if err != nil || n >= limit {
		return n, err
	}
	m, err := s.rotateOutbox(ctx, time.Now(), before)
	return n + m, err
}

// rotateOutbox maintains the outbox's slices on one connection that holds
// a session advisory lock while it works (another process's purge skips
// them): it makes the slice created ahead current once the current one
// has been so for OutboxSlice (at now), creates a slice ahead, retires
// each past slice that stopped being current before before, once the
// unsent rows left in it are moved to the current slice and every row in
// it was sent before before, and detaches and drops the retired ones. It
// returns the rows of the slices it retired.
func (s *driver) rotateOutbox(ctx context.Context, now, before time.Time) (int, error) {
	slices := s.Name("outbox_slices")
	return s.maintain(ctx, slices, "", func(conn *pgxpool.Conn) (int, error) {
		cur, err := s.switchSlice(ctx, conn, now)
		if err != nil {
			return 0, fmt.Errorf("idem/postgres: outbox slices: %w", err)
		}
		rows, err := conn.Query(ctx, "SELECT id FROM "+slices+" WHERE until IS NOT NULL AND until <= $1 AND NOT retired ORDER BY id", before)
		if err != nil {
			return 0, err
		}
		past, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return 0, err
		}
		retired := 0
		for _, id := range past {
			n, err := s.retireSlice(ctx, conn, id, cur, before)
			if err != nil {
				return retired, fmt.Errorf("idem/postgres: outbox slice %d: %w", id, err)
			}
			retired += n
		}
		if err := s.dropSlices(ctx, conn, cur); err != nil {
			return retired, fmt.Errorf("idem/postgres: dropping outbox slices: %w", err)
		}
		return retired, nil
	})
}

// switchSlice makes the slice created ahead current if the current one
// has been so for OutboxSlice at now, creates one ahead if there is none,
// and sets the sequence that the outbox's default reads to the current
// slice (after a crash between the catalog's commit and the sequence, at
// the next purge). It returns the current slice.
func (s *driver) switchSlice(ctx context.Context, conn *pgxpool.Conn, now time.Time) (int64, error) {
	slices := s.Name("outbox_slices")
	var cur int64
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var since time.Time
		if err := tx.QueryRow(ctx, "SELECT id, since FROM "+slices+" WHERE since IS NOT NULL AND until IS NULL ORDER BY id DESC LIMIT 1").
			Scan(&cur, &since); err != nil {
			return err
		}
		var next *int64
		if err := tx.QueryRow(ctx, "SELECT min(id) FROM "+slices+" WHERE id > $1 AND since IS NULL AND created <= clock_timestamp() - $2::interval",
			cur, s.sliceReady).Scan(&next); err != nil {
			return err
		}
		if next != nil && !now.Before(since.Add(s.outboxSlice)) {
			if _, err := tx.Exec(ctx, "UPDATE "+slices+" SET until = $2 WHERE id = $1", cur, now); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE "+slices+" SET since = $2 WHERE id = $1", *next, now); err != nil {
				return err
			}
			cur = *next
		}
		var ahead bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+slices+" WHERE id > $1 AND since IS NULL)", cur).Scan(&ahead); err != nil {
			return err
		}
		if !ahead {
			_, err := tx.Exec(ctx, "SELECT "+s.Name("outbox_slice_add")+"()")
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// Non-transactional: set once the catalog says so.
	_, err = conn.Exec(ctx, "SELECT setval($1::regclass, $2, true) WHERE pg_sequence_last_value($1::regclass) IS DISTINCT FROM $2",
		s.Name("outbox_slice_seq"), cur)
	return cur, err
}

// retireSlice retires past slice id if it can: in one transaction that
// holds the slice in SHARE mode (no transaction that added to it or
// marks its rows is still open, and none starts meanwhile; waited for at
// most detachWait), it moves the unsent rows of each aggregate whose head
// (lowest unsent row) it can lock to slice cur, keeping their IDs and
// sequences, and then, if no unsent row is left and every row was sent
// or discarded before before, marks the slice retired. Aggregates whose
// head a relay holds keep their rows until a later purge. It returns the
// rows of the slice if it retired it.
func (s *driver) retireSlice(ctx context.Context, conn *pgxpool.Conn, id, cur int64, before time.Time) (int, error) {
	outbox, name := s.Name("outbox"), s.partName(s.outboxTable, id)
	var n int
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = "+strconv.FormatInt(detachWait.Milliseconds(), 10)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE "+name+" IN SHARE MODE"); err != nil {
			return err
		}
		// The heads of the aggregates with unsent rows here, wherever
		// they are, locked as a claim locks them: a relay holding one
		// marks its aggregate's rows, which must then stay where they are.
		rows, err := tx.Query(ctx, `SELECT h.aggregate_id FROM (SELECT DISTINCT aggregate_id FROM `+name+` WHERE state IN (0, 2)) a
			CROSS JOIN LATERAL (SELECT o.aggregate_id FROM `+outbox+` o WHERE o.aggregate_id = a.aggregate_id
				AND o.sequence = (SELECT min(sequence) FROM `+outbox+` WHERE aggregate_id = a.aggregate_id AND state IN (0, 2))
				AND o.state IN (0, 2)
				FOR UPDATE SKIP LOCKED) h`)
		if err != nil {
			return err
		}
		aggs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(aggs) > 0 {
			if _, err := tx.Exec(ctx, "UPDATE "+outbox+" SET slice = $1, claims_only = TRUE WHERE slice = $2 AND state IN (0, 2) AND aggregate_id = ANY($3)",
				cur, id, aggs); err != nil {
				return err
			}
		}
		var keep bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+name+` WHERE state IN (0, 2))
			OR EXISTS (SELECT 1 FROM `+name+` WHERE state IN (1, 3) AND sent_at >= $1)`, before).Scan(&keep); err != nil || keep {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+name).Scan(&n); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE "+s.Name("outbox_slices")+" SET retired = TRUE WHERE id = $1", id)
		return err
	})
	return n, err
}

// dropSlices detaches the retired slices from the outbox and drops them,
// on conn: DETACH PARTITION CONCURRENTLY outside a transaction (it waits
// for the transactions that may still see a slice, at most detachWait,
// without blocking adds or claims; a detach a crash or that wait
// interrupted is finished with FINALIZE at a later purge), then, in one
// transaction, the rows of the detached table that are unsent (none,
// unless an operator requeued a discarded row meanwhile) are put back
// into slice cur, and the table is dropped.
func (s *driver) dropSlices(ctx context.Context, conn *pgxpool.Conn, cur int64) error {
	outbox, prefix := s.Name("outbox"), s.partPrefix(s.outboxTable)
	return withDetachWait(ctx, conn, func() error {
		list, err := retiredSlices(ctx, conn, `SELECT s.id, i.inhdetachpending FROM `+s.Name("outbox_slices")+` s
			LEFT JOIN pg_inherits i ON i.inhrelid = to_regclass($1 || s.id || '"') WHERE s.retired ORDER BY s.id`, prefix)
		if err != nil {
			return err
		}
		for _, r := range list {
			name := s.partName(s.outboxTable, r.id)
			if err := detach(ctx, conn, outbox, name, r.pending); err != nil {
				return err
			}
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				var exists bool
				if err := tx.QueryRow(ctx, "SELECT to_regclass($1 || $2::bigint || '\"') IS NOT NULL", prefix, r.id).Scan(&exists); err != nil {
					return err
				}
				if exists {
					if _, err := tx.Exec(ctx, "INSERT INTO "+outbox+" ("+outboxColumns+", slice, claims_only) OVERRIDING SYSTEM VALUE SELECT "+
						outboxColumns+", $1, TRUE FROM "+name+" WHERE state IN (0, 2)", cur); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, "DROP TABLE "+name); err != nil {
						return err
					}
				}
				_, err := tx.Exec(ctx, "DELETE FROM "+s.Name("outbox_slices")+" WHERE id = $1", r.id)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// outboxColumns are the outbox's columns but slice and claims_only.
const outboxColumns = `id, message_id, aggregate_id, version, sequence, type, headers, payload, state, attempts,
	created_at, next_attempt, last_error, sent_at`
