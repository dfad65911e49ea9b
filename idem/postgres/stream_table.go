package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// The stream's work on the table: which rows of a window may go
// (Publishable, Clear), the sweeps' horizon, and settling a window.

func (st *stream) Publishable(ctx context.Context, rows, aloft []outbox.Row) ([]outbox.Row, int, error) {
	if len(rows) == 0 {
		return nil, 0, nil
	}
	// Each aggregate's lowest sequence among the window's rows and those
	// in flight before it: the rows of an aggregate from there on were
	// streamed in order and are in the window or in flight, so an unsent
	// row below it is one the stream left in the table.
	low := map[string]int64{}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.RowID
		if s, ok := low[r.AggregateID]; !ok || r.Sequence < s {
			low[r.AggregateID] = r.Sequence
		}
	}
	for _, r := range aloft {
		if s, ok := low[r.AggregateID]; ok && r.Sequence < s {
			low[r.AggregateID] = r.Sequence
		}
	}
	aggs, seqs := make([]string, 0, len(low)), make([]int64, 0, len(low))
	for a, s := range low {
		aggs, seqs = append(aggs, a), append(seqs, s)
	}
	rs, err := st.d.pool.Query(ctx, st.d.streamSQL().held, ids, aggs, seqs)
	if err != nil {
		return nil, 0, err
	}
	type out struct {
		ID   int64
		Agg  string
		Held bool
	}
	left, err := pgx.CollectRows(rs, pgx.RowToStructByPos[out])
	if err != nil || len(left) == 0 {
		return rows, 0, err
	}
	gone := map[int64]bool{} // row ID: left out; true if held
	blocked := map[string]bool{}
	for _, o := range left {
		if o.ID == 0 {
			blocked[o.Agg] = true
		} else {
			gone[o.ID] = o.Held
		}
	}
	held := 0
	keep := rows[:0:0]
	for _, r := range rows {
		h, out := gone[r.RowID]
		switch {
		case blocked[r.AggregateID]:
			held++
		case out && h: // the rows of its aggregate after it wait too
			held++
			blocked[r.AggregateID] = true
		case out:
		default:
			keep = append(keep, r)
		}
	}
	return keep, held, nil
}

// Clear implements logStream (an index scan of
// outbox_left_idx, migration 013).
func (st *stream) Clear(ctx context.Context) (bool, error) {
	var clear bool
	err := st.d.pool.QueryRow(ctx, st.d.streamSQL().clear).Scan(&clear)
	return clear, err
}

// Horizon implements logStream: now, or the start of the oldest
// open transaction that wrote, among the sessions on this database the
// role may see (pg_stat_activity shows other roles' transactions only to
// members of pg_read_all_stats), and the log's insert position.
func (st *stream) Horizon(ctx context.Context) (time.Time, uint64, error) {
	var t time.Time
	var pos pglogrepl.LSN
	err := st.d.pool.QueryRow(ctx, `SELECT LEAST(now(), (SELECT min(xact_start) FROM pg_stat_activity
		WHERE datname = current_database() AND backend_xid IS NOT NULL)), pg_current_wal_insert_lsn()`).Scan(&t, &pos)
	return t, uint64(pos), err
}

// Settle implements logStream. A streamed commit is in the log a
// moment before its rows are visible to other transactions: rows the
// DELETE, the UPDATE recording a failure or the one marking passed rows
// did not find are looked for again, after 1, 2, 4, ... 64ms; those still
// not found (unseen) were gone already (a window streamed again after a
// crash), or are still to become visible (a commit waiting for a
// synchronous standby): the loop sweeps for them. A failure recorded on
// nothing would leave its row pending as if never tried: a claim would
// publish (or quarantine) it a second time.
func (st *stream) Settle(ctx context.Context, sent []int64, failed []seam.OutboxFailure, passed []int64, at time.Time) (int, error) {
	if len(sent) == 0 && len(failed) == 0 && len(passed) == 0 {
		return 0, nil
	}
	q := st.d.streamSQL()
	var gone, marked []int64
	var err error
	if len(failed) == 0 && len(passed) == 0 { // one statement: no transaction of our own
		gone, err = queryIDs(ctx, st.d.pool, q.settle, sent)
	} else {
		err = pgx.BeginFunc(ctx, st.d.pool, func(tx pgx.Tx) error {
			var err error
			if gone, err = queryIDs(ctx, tx, q.settle, sent); err != nil {
				return err
			}
			if failed, err = st.fail(ctx, tx, failed, at); err != nil {
				return err
			}
			marked, err = queryIDs(ctx, tx, q.pass, passed)
			return err
		})
	}
	missing := func(ids, found []int64) []int64 {
		if len(found) == len(ids) { // each ID once: every one found
			return ids[:0]
		}
		in := make(map[int64]struct{}, len(found))
		for _, id := range found {
			in[id] = struct{}{}
		}
		return slices.DeleteFunc(ids, func(id int64) bool { _, ok := in[id]; return ok })
	}
	sent, passed = missing(sent, gone), missing(passed, marked)
	for wait := time.Millisecond; err == nil && len(sent)+len(failed)+len(passed) > 0 && wait <= 64*time.Millisecond; wait *= 2 {
		if f := st.d.settleRetry.Load(); f != nil {
			(*f)()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		if gone, err = queryIDs(ctx, st.d.pool, q.settle, sent); err == nil {
			sent = missing(sent, gone)
			if failed, err = st.fail(ctx, st.d.pool, failed, at); err == nil {
				marked, err = queryIDs(ctx, st.d.pool, q.pass, passed)
				passed = missing(passed, marked)
			}
		}
	}
	if err != nil {
		return 0, err
	}
	return len(sent) + len(failed) + len(passed), nil
}

// fail records failed, and returns the failures whose row it did not
// find (not visible yet, or not pending).
func (st *stream) fail(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, failed []seam.OutboxFailure, at time.Time) ([]seam.OutboxFailure, error) {
	var missed []seam.OutboxFailure
	for _, f := range failed {
		for _, stmt := range st.d.Outbox.FailStmts([]seam.OutboxFailure{f}, at) {
			tag, err := db.Exec(ctx, stmt.SQL, stmt.Args...)
			if err != nil {
				return nil, err
			}
			if tag.RowsAffected() == 0 {
				missed = append(missed, f)
			}
		}
	}
	return missed, nil
}

// queryIDs runs a statement returning row IDs, with ids its one argument
// (none when ids is empty).
func queryIDs(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rs, err := db.Query(ctx, sql, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rs, pgx.RowTo[int64])
}

// streamQueries are the stream's statements on the table.
type streamQueries struct {
	held, settle, pass, clear string
}

func (s *driver) streamSQL() streamQueries {
	o := s.Core.Name("outbox")
	return streamQueries{
		// The window's rows to leave out, and whether they are held
		// (left for claims): those no longer pending (sent by a claim or
		// discarded: not held; quarantined: held) or that failed before;
		// and the aggregates with an unsent row below their lowest
		// sequence in the window and the windows in flight before it (a
		// failed or quarantined row, or one the stream passed over: the
		// later rows wait for claims). A streamed row may not be visible
		// yet (its commit is in the log before it is visible): the
		// window's own columns say where it stands. A row for the claims
		// only (claims_only, migration 013) is held, left to them: one the
		// stream passed before (streamed again after a crash), or one the
		// purge moved to another slice (a move is an insert in the log),
		// like its first insert if that is still to come.
		//
		// Each row and each aggregate is looked up on its own (LATERAL
		// with LIMIT: no join the planner could choose instead): a
		// window is small and the table may hold a large backlog, whose
		// slices' statistics lag behind (filled since autovacuum last
		// analysed them, if it runs), and a planner misled by them
		// scanned every pending row for each window (a hash join, a
		// sequential scan: a backlog drained in time quadratic in its
		// size).
		held: `SELECT r.id, '', r.state NOT IN (1, 3) FROM unnest($1::bigint[]) AS w(id)
				CROSS JOIN LATERAL (SELECT r.id, r.state FROM ` + o + ` r
					WHERE r.id = w.id AND (r.state <> 0 OR r.attempts > 0 OR r.claims_only) LIMIT 1) r
			UNION ALL
			SELECT 0, w.agg, TRUE FROM unnest($2::text[], $3::bigint[]) AS w(agg, seq)
				CROSS JOIN LATERAL (SELECT FROM ` + o + ` e
					WHERE e.aggregate_id = w.agg AND e.sequence < w.seq AND e.state IN (0, 2) LIMIT 1) e`,
		// The DELETE commits without waiting for its log to be flushed
		// (synchronous_commit off, for its own transaction only): lost in
		// a server crash, it leaves rows pending that the slot, saved
		// only at checkpoints before PostgreSQL 17, streams again (sent
		// again, as after any crash of the server), or that a sweep
		// claims; nothing is lost. It spares each window a flush.
		settle: `WITH s AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true))
			DELETE FROM ` + o + ` WHERE id = ANY($1::bigint[]) AND EXISTS (SELECT 1 FROM s) RETURNING id`,
		// The rows of a window not published are for the claims only
		// (failed ones are recorded failed besides). In the window's
		// transaction, with its failures.
		pass: `UPDATE ` + o + ` SET claims_only = TRUE WHERE id = ANY($1::bigint[]) RETURNING id`,
		// Clear: the predicate of outbox_left_idx (migration 013).
		clear: `SELECT NOT EXISTS (SELECT 1 FROM ` + o + `
			WHERE state = 2 OR (state = 0 AND (attempts > 0 OR claims_only OR next_attempt <> created_at)))`,
	}
}
