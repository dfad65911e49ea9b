package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/outbox"
)

// The sliced outbox (Options.OutboxSlice, migration 015,
// docs/retention.md): the outbox table is the current one, where rows are
// added and claimed exactly as in the default outbox, and <prefix>outbox_prev
// the previous one, holding only rows that were sent or discarded when it
// was rotated out. A rotation drops the previous table, renames the
// current one previous, creates a new current one and moves the unsent
// rows into it: adds and claims never look at the previous table.

// outboxColumns are the outbox's columns but claims_only.
const outboxColumns = `id, message_id, aggregate_id, version, sequence, type, headers, payload, state, attempts,
	created_at, next_attempt, last_error, sent_at`

// sliceLister is what ListOutbox reads on a sliced outbox: both tables.
const sliceLister = `(SELECT * FROM {{outbox}} UNION ALL SELECT * FROM {{outbox_prev}}) o`

// PurgeOutbox implements the relay's part (outbox's relayStore). Without Options.OutboxSlice it
// deletes, in one transaction, at most limit sent and discarded rows
// older than before. With it, it deletes no row but rotates the outbox
// once its current table is OutboxSlice old (rotateOutbox), and returns
// the rows of the previous table it dropped.
func (s *driver) PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error) {
	if s.outboxSlice <= 0 {
		return s.Outbox.PurgeOutbox(ctx, before, limit)
	}
	return s.rotateOutbox(ctx, time.Now(), before, limit)
}

// rotateOutbox rotates the outbox if it is due at now: the current table
// has been so for OutboxSlice (or never rotated), every row of the
// previous table was sent or discarded before before, and the current
// table holds at most limit unsent rows (more wait for the relays: they
// would be moved under the rotation's lock). In one transaction that
// locks both tables (ACCESS EXCLUSIVE, waiting at most rotateWait for the
// transactions that added, claimed or marked in them; adds and claims
// queue behind it meanwhile), it drops the previous table, renames the
// current one previous, creates a new current one (LIKE it: the same
// columns, defaults, constraints and indexes; the identity continues),
// moves the unsent rows into it with their IDs and sequences, flagged for
// the claims only (a move is an insert in the log, which the outbox
// stream must not publish again), and adds it to the publications of the
// old one. It returns the rows of the previous table it dropped.
func (s *driver) rotateOutbox(ctx context.Context, now, before time.Time, limit int) (int, error) {
	cur, prev, rotated := s.Name("outbox"), s.Name("outbox_prev"), s.Name("outbox_rotated")
	type querier interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}
	due := func(q querier) (bool, error) {
		var ok bool
		err := q.QueryRow(ctx, `SELECT coalesce((SELECT at <= $1 FROM `+rotated+`), true)
			AND NOT EXISTS (SELECT 1 FROM `+prev+` WHERE state IN (1, 3) AND sent_at >= $2)
			AND (SELECT count(*) FROM (SELECT 1 FROM `+cur+` WHERE state IN (0, 2) LIMIT $3) u) < $3`,
			now.Add(-s.outboxSlice), before, limit+1).Scan(&ok)
		return ok, err
	}
	if ok, err := due(s.pool); err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("idem/postgres: outbox rotation: %w", err)
		}
		return 0, err
	}
	var dropped int64 // nothing adds to the previous table: counted before the lock
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+prev).Scan(&dropped); err != nil {
		return 0, fmt.Errorf("idem/postgres: outbox rotation: %w", err)
	}
	done := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = "+strconv.FormatInt(rotateWait.Milliseconds(), 10)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE "+cur+", "+prev+", "+rotated+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return err
		}
		if ok, err := due(tx); err != nil || !ok { // another process rotated meanwhile
			return err
		}
		// The publications of the current table and the columns each
		// publishes ("" for all), and where its identity stands.
		rows, err := tx.Query(ctx, `SELECT p.pubname, coalesce((SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)
				FROM pg_attribute a WHERE a.attrelid = r.prrelid AND a.attnum = ANY (r.prattrs)), '')
			FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid WHERE r.prrelid = $1::regclass`, cur)
		if err != nil {
			return err
		}
		type pub struct{ name, cols string }
		pubs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pub, error) {
			var p pub
			return p, r.Scan(&p.name, &p.cols)
		})
		if err != nil {
			return err
		}
		var next int64
		if err := tx.QueryRow(ctx, `SELECT GREATEST(coalesce(pg_sequence_last_value(pg_get_serial_sequence($1, 'id')::regclass), 0),
			(SELECT coalesce(max(id), 0) FROM `+cur+`)) + 1`, cur).Scan(&next); err != nil {
			return err
		}
		stmts := []string{
			"DROP TABLE " + prev,
			"ALTER TABLE " + cur + " RENAME TO " + pgx.Identifier{s.outboxTable + "_prev"}.Sanitize(),
			"CREATE TABLE " + cur + " (LIKE " + prev + " INCLUDING ALL)",
			"ALTER TABLE " + cur + " ALTER COLUMN id RESTART WITH " + strconv.FormatInt(next, 10),
		}
		// Published before the moves: the stream must see them (and leave
		// them to the claims).
		for _, p := range pubs {
			t := cur
			if p.cols != "" {
				t += " (" + p.cols + ")"
			}
			stmts = append(stmts, "ALTER PUBLICATION "+pgx.Identifier{p.name}.Sanitize()+" ADD TABLE "+t)
		}
		stmts = append(stmts,
			"INSERT INTO "+cur+" ("+outboxColumns+", claims_only) OVERRIDING SYSTEM VALUE SELECT "+outboxColumns+
				", TRUE FROM "+prev+" WHERE state IN (0, 2) ORDER BY id",
			"DELETE FROM "+prev+" WHERE state IN (0, 2)")
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+rotated+" (at) VALUES ($1) ON CONFLICT (one) DO UPDATE SET at = excluded.at", now); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("idem/postgres: outbox rotation: %w", err)
	}
	if !done {
		return 0, nil
	}
	return int(dropped), nil
}

// SetOutboxState implements the relay's part (outbox's relayStore). On a sliced outbox, a row
// rotated into the previous table (sent or discarded then) is moved back
// to the current one first, so that an operator can still requeue it.
func (s *driver) SetOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error) {
	ok, err := s.Outbox.SetOutboxState(ctx, rowID, to, at, from...)
	if ok || err != nil || s.outboxSlice <= 0 || len(from) == 0 {
		return ok, err
	}
	states := make([]int16, len(from))
	for i, f := range from {
		states[i] = int16(f)
	}
	tag, err := s.pool.Exec(ctx, `WITH d AS (DELETE FROM `+s.Name("outbox_prev")+` WHERE id = $1 AND state = ANY ($2::smallint[]) RETURNING *)
		INSERT INTO `+s.Name("outbox")+` (`+outboxColumns+`, claims_only) OVERRIDING SYSTEM VALUE SELECT `+outboxColumns+`, TRUE FROM d`,
		rowID, states)
	if err != nil {
		var pe interface{ SQLState() string }
		if errors.As(err, &pe) && pe.SQLState() == "42P01" { // rotated meanwhile
			return false, nil
		}
		return false, fmt.Errorf("idem/postgres: outbox row %d from the previous table: %w", rowID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	return s.Outbox.SetOutboxState(ctx, rowID, to, at, from...)
}
