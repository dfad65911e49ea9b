package sqlcore

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// OutboxDialect is what differs between the databases for the outbox.
type OutboxDialect struct {
	// SkipLocked claims rows with FOR UPDATE SKIP LOCKED in a transaction
	// held open while the relay publishes (PostgreSQL). Without it, a
	// single relay lease serialises relays (SQLite).
	SkipLocked bool
	// Notify, if not empty, is the statement that notifies waiting relays,
	// appended to the statement that inserts an adding transaction's (last)
	// rows: the channel name's placeholder is %s (PostgreSQL: SELECT
	// pg_notify(%s, '') WHERE a relay waits). WakeShared, if set, makes it
	// safe to skip the notification while no relay waits: it is an
	// expression, with the wake lock's key as %s, that takes a shared
	// transaction lock, evaluated by the adding transaction's first
	// statement, so that Notify, a later statement, reads the wake flags
	// with a snapshot taken after the lock was granted. WakeTry tries the
	// same lock exclusively (also an expression, reporting whether it got
	// it), in IdleOutbox's single statement. PostgreSQL: advisory locks.
	// See IdleOutbox for why this is enough.
	Notify              string
	WakeShared, WakeTry string
	// OneStatementAdd makes AddOutbox one statement (PostgreSQL: addSingle
	// for one row, addOne with arrays for more, both data-modifying WITH
	// clauses) instead of a counter upsert and inserts. WakeNotify, if
	// set, is then the wake-up in that statement: an expression, with the
	// wake lock's key and the channel as its two %s, that takes the wake
	// lock shared and then notifies if a relay waits, reading the flags
	// with a snapshot taken after the lock was granted (a VOLATILE
	// function; see addOneStatement). Notify and WakeShared are then not
	// used by AddOutbox.
	OneStatementAdd bool
	WakeNotify      string
	// Auto, if set, runs f with every statement its own transaction (no
	// BEGIN and COMMIT round trips); the wake flags' statements run so.
	// Required with WakeTry.
	Auto func(ctx context.Context, f func(q Querier) error) error
	// Read, if set, runs f outside any write transaction. In lease mode a
	// claim first looks there whether the lease is free and a row is due,
	// so that idle or waiting relays do not take SQLite's write lock.
	Read func(ctx context.Context, f func(q Querier) error) error
	// ListFrom, if not empty, is what ListOutbox reads rows from instead
	// of the outbox table: PostgreSQL's sliced outbox lists its current
	// and previous tables.
	ListFrom string
	// MarkSent, if not empty, is the statement that marks a batch's rows
	// sent: $1 the time, $2 the row IDs as an array. Without it, rows are
	// marked with an IN list per 500 (a statement of its own text for each
	// count).
	MarkSent string
	// ClaimQuery, if not nil, builds the claim statements instead of
	// claimQuery (with SkipLocked): the same parameters and result
	// columns, for a database without LATERAL (MySQL, MariaDB), which
	// locks its heads with FOR UPDATE SKIP LOCKED in a derived table.
	ClaimQuery func(below, first bool) string
}

// Outbox implements the outbox's part (outbox's outboxStore) on a Core.
type Outbox[Tx any] struct {
	c       *Core[Tx]
	d       OutboxDialect
	channel string
	wakeKey int64 // the advisory lock of the wake flag
	q       outboxQueries
	// markSent is the dialect's MarkSent, rendered.
	markSent string

	mu     sync.Mutex
	cursor string // the aggregate the next claim starts after ("": the first)
}

type outboxQueries struct {
	counter, counterRead, insert, notify, addOne, addSingle, wakeNotify, claim, claimFirst, claimBelow, lease, peek, release, renew, wakeShared, wakeTry, setIdle, renewIdle, setBusy, sent, failed, health, list, requeue, discard, purge string

	// listNoPayload is list without the payloads (OutboxFilter.NoPayload).
	listNoPayload string
}

const outboxCols = `id, message_id, aggregate_id, version, sequence, type, headers, payload, state, attempts,
	created_at, next_attempt, last_error, sent_at`

// NewOutbox returns the outbox part of c.
func NewOutbox[Tx any](c *Core[Tx], d OutboxDialect) *Outbox[Tx] {
	h := fnv.New32a()
	h.Write([]byte(c.names["outbox"]))
	o := &Outbox[Tx]{c: c, d: d, channel: fmt.Sprintf("wary_outbox_%08x", h.Sum32())}
	k := fnv.New64a()
	k.Write([]byte("wary-outbox-wake:" + c.names["outbox"]))
	o.wakeKey = int64(k.Sum64())
	r := c.render
	cq := func(below, first bool) string { return claimQuery(d.SkipLocked, below, first) }
	if d.ClaimQuery != nil {
		cq = d.ClaimQuery
	}
	claim, claimFirst, claimBelow := r(cq(false, false)), r(cq(false, true)), r(cq(true, true))
	returning := "\n\t\t\tRETURNING aggregate_id, last_sequence"
	if c.d.NoReturning {
		returning = ""
	}
	o.q = outboxQueries{
		// Rows are locked in the order of the VALUES list: aggregate order.
		counter: c.render(`INSERT INTO {{outbox_aggregates}} AS a (aggregate_id, last_sequence) VALUES %s
			ON CONFLICT (aggregate_id) DO UPDATE SET last_sequence = a.last_sequence + excluded.last_sequence` + returning),
		// Without RETURNING, the counters the upsert locked are read by
		// their keys, in the same transaction (see returning.go).
		counterRead: c.render(`SELECT aggregate_id, last_sequence FROM {{outbox_aggregates}} WHERE aggregate_id IN (%s)`),
		insert: c.render(`INSERT INTO {{outbox}} (message_id, aggregate_id, version, sequence, type, headers, payload,
			created_at, next_attempt) VALUES `),
		notify:     r(d.Notify),
		wakeNotify: d.WakeNotify,
		wakeShared: d.WakeShared,
		wakeTry:    d.WakeTry,
		// A waiting relay's flag is its own row (PostgreSQL only: the only
		// store with WakeTry), which lasts $3 seconds unless renewed. One
		// statement tries the wake lock ($1) and, if it got it, sweeps the
		// flags that ran out and sets relay $2's.
		setIdle: r(`WITH l AS (SELECT ` + fmt.Sprintf(cmp.Or(d.WakeTry, "%s"), "$1") + ` AS ok),
			s AS (DELETE FROM {{outbox_wake}} WHERE (SELECT ok FROM l) AND name NOT IN ('outbox', $2)
				AND expires_at < clock_timestamp()),
			i AS (INSERT INTO {{outbox_wake}} (name, idle, expires_at)
				SELECT $2, TRUE, clock_timestamp() + make_interval(secs => $3) FROM l WHERE ok
				ON CONFLICT (name) DO UPDATE SET idle = TRUE, expires_at = excluded.expires_at)
			SELECT ok FROM l`),
		renewIdle: r(`UPDATE {{outbox_wake}} SET expires_at = clock_timestamp() + make_interval(secs => $2)
			WHERE name = $1 AND idle`),
		setBusy:    r(`UPDATE {{outbox_wake}} SET idle = FALSE WHERE name = $1 AND idle`),
		claim:      claim,
		claimFirst: claimFirst,
		claimBelow: claimBelow,
		lease: r(`INSERT INTO {{relay_lease}} AS l (name, owner, expires_at) VALUES ('outbox', $1, $2)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE l.owner = excluded.owner OR l.expires_at <= $3`),
		// The lease's owner and expiry ("-" and NULL if there is none),
		// or "" if no row is pending and due.
		peek: r(`SELECT COALESCE(l.owner, '-'), l.expires_at FROM (SELECT 1 AS one) x
			LEFT JOIN {{relay_lease}} l ON l.name = 'outbox'
			WHERE EXISTS (SELECT 1 FROM {{outbox}} WHERE state = 0 AND next_attempt <= $1)
			UNION ALL SELECT '', NULL WHERE NOT EXISTS (SELECT 1 FROM {{outbox}} WHERE state = 0 AND next_attempt <= $1)`),
		release: r(`DELETE FROM {{relay_lease}} WHERE name = 'outbox' AND owner = $1`),
		renew:   r(`UPDATE {{relay_lease}} SET expires_at = $2 WHERE name = 'outbox' AND owner = $1 AND expires_at > $3`),
		sent:    `UPDATE {{outbox}} SET state = 1, sent_at = $1 WHERE state <> 1 AND id IN (`,
		failed: r(`UPDATE {{outbox}} SET attempts = attempts + 1, last_error = $2, next_attempt = $3, state = $4
			WHERE id = $1 AND state = 0`),
		health: r(`SELECT COALESCE(SUM(CASE WHEN state = 0 THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN state = 0 AND attempts > 0 THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN state = 2 THEN 1 ELSE 0 END), 0), MIN(created_at)
			FROM {{outbox}} WHERE state IN (0, 2)`),
		list:          r(`SELECT ` + outboxCols + ` FROM ` + cmp.Or(d.ListFrom, "{{outbox}}")),
		listNoPayload: r(`SELECT ` + strings.Replace(outboxCols, "payload", "NULL", 1) + ` FROM ` + cmp.Or(d.ListFrom, "{{outbox}}")),
		requeue: `UPDATE {{outbox}} SET state = 0, attempts = 0, next_attempt = $2, last_error = ''
			WHERE id = $1 AND state IN (`,
		discard: `UPDATE {{outbox}} SET state = 3, sent_at = $2 WHERE id = $1 AND state IN (`,
		purge: r(`DELETE FROM {{outbox}} WHERE id IN (
			SELECT id FROM {{outbox}} WHERE state IN (1, 3) AND sent_at < $1 LIMIT $2)`),
	}
	o.markSent = r(d.MarkSent)
	if d.OneStatementAdd {
		wake := "NULL"
		if d.WakeNotify != "" {
			wake = "(SELECT " + fmt.Sprintf(d.WakeNotify, "$11::bigint", "$12::text") + ")"
		}
		o.q.addOne = r(fmt.Sprintf(addOne, wake))
		wake = "NULL"
		if d.WakeNotify != "" {
			wake = fmt.Sprintf(d.WakeNotify, "$8::bigint", "$9::text")
		}
		o.q.addSingle = r(fmt.Sprintf(addSingle, wake))
	}
	return o
}

// Channel is the PostgreSQL notification channel of this outbox.
func (o *Outbox[Tx]) Channel() string { return o.channel }

// AddOutbox implements the outbox's part (outbox's outboxStore).
func (o *Outbox[Tx]) AddOutbox(ctx context.Context, tx Tx, msgs []outbox.Message, at time.Time) ([]int64, error) {
	q := o.c.b.Q(tx)
	if o.q.addOne != "" {
		if len(msgs) == 0 {
			return []int64{}, nil
		}
		return o.addOneStatement(ctx, q, msgs, at)
	}
	// Lock each aggregate's counter once, in aggregate order.
	count := map[string]int64{}
	for _, m := range msgs {
		count[m.AggregateID]++
	}
	aggs := make([]string, 0, len(count))
	for a := range count {
		aggs = append(aggs, a)
	}
	slices.Sort(aggs)
	next := map[string]int64{}
	for chunk := range slices.Chunk(aggs, 500) {
		args := make([]any, 0, 2*len(chunk)+1)
		vals := make([]string, len(chunk))
		for i, a := range chunk {
			args = append(args, a, count[a])
			vals[i] = fmt.Sprintf("($%d, $%d)", 2*i+1, 2*i+2)
		}
		stmt := fmt.Sprintf(o.q.counter, strings.Join(vals, ", "))
		var lock []any
		if o.q.wakeShared != "" && len(next) == 0 {
			// The first statement takes the shared wake lock (see
			// IdleOutbox): once, in an init plan of the RETURNING list.
			args = append(args, o.wakeKey)
			stmt = "WITH wake AS (SELECT " + fmt.Sprintf(o.q.wakeShared, "$"+strconv.Itoa(len(args))) + ") " +
				stmt + ", (SELECT 1 FROM wake)"
			lock = []any{new(int)}
		}
		var rs Rows
		var err error
		if o.c.d.NoReturning {
			rs, err = o.counters(ctx, q, stmt, args)
		} else {
			rs, err = q.Query(ctx, o.c.d.Rebind(stmt), args...)
		}
		if err != nil {
			return nil, fmt.Errorf("sequences: %w", err)
		}
		for rs.Next() {
			var a string
			var last int64
			if err := rs.Scan(append([]any{&a, &last}, lock...)...); err != nil {
				rs.Close()
				return nil, err
			}
			next[a] = last - count[a] + 1
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, fmt.Errorf("sequences: %w", err)
		}
	}
	if len(next) != len(aggs) {
		return nil, fmt.Errorf("sequences: %d counters for %d aggregates", len(next), len(aggs))
	}
	seqs := make([]int64, len(msgs))
	t := o.c.d.Time(at)
	for start := 0; start < len(msgs); start += 100 {
		chunk := msgs[start:min(start+100, len(msgs))]
		args := make([]any, 0, 8*len(chunk))
		vals := make([]string, len(chunk))
		for i, m := range chunk {
			seq := next[m.AggregateID]
			next[m.AggregateID]++
			seqs[start+i] = seq
			h, err := headerText(m.Headers)
			if err != nil {
				return nil, err
			}
			n := len(args)
			args = append(args, m.ID, m.AggregateID, m.Version, seq, m.Type, h, payloadOf(m), t)
			vals[i] = fmt.Sprintf("($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+8)
		}
		stmt := o.q.insert + strings.Join(vals, ", ")
		if o.q.notify != "" && start+100 >= len(msgs) {
			// The last insert notifies if a relay waits: a statement after
			// the one that took the wake lock, so its snapshot, taken after
			// the lock was granted, sees every flag set before.
			args = append(args, o.channel)
			stmt = "WITH ins AS (" + stmt + ") " + fmt.Sprintf(o.q.notify, "$"+strconv.Itoa(len(args)))
		}
		if _, err := q.Exec(ctx, o.c.d.Rebind(stmt), args...); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
	}
	return seqs, nil
}

// counters runs stmt, the counters' upsert without RETURNING, with args
// (aggregate, count, aggregate, count...), then reads the counters it
// locked (see returning.go).
func (o *Outbox[Tx]) counters(ctx context.Context, q Querier, stmt string, args []any) (Rows, error) {
	if _, err := q.Exec(ctx, o.c.d.Rebind(stmt), args...); err != nil {
		return nil, err
	}
	keys := make([]any, 0, len(args)/2)
	ph := make([]string, 0, len(args)/2)
	for i := 0; i < len(args); i += 2 {
		keys = append(keys, args[i])
		ph = append(ph, "$"+strconv.Itoa(len(keys)))
	}
	return q.Query(ctx, o.c.d.Rebind(fmt.Sprintf(o.q.counterRead, strings.Join(ph, ", "))), keys...)
}

// ClaimOutbox claims up to r.Limit rows for r.Owner: the lowest unsent
// row (pending or quarantined) of each aggregate, if it is pending and
// due at r.Now, followed by up to r.PerAggregate-1 more pending rows of
// the same aggregate, in sequence order. An aggregate whose first unsent
// row another relay has claimed is skipped. Nothing claimed returns a
// batch with no rows.
func (o *Outbox[Tx]) ClaimOutbox(ctx context.Context, r Claim) (Batch, error) {
	if o.d.SkipLocked {
		return o.claimHeld(ctx, r)
	}
	if o.d.Read != nil {
		return o.claimLeased(ctx, r)
	}
	var rows []outbox.Row
	err := o.c.inTx(ctx, func(q Querier) error {
		ok, err := o.takeLease(ctx, q, r)
		if ok && err == nil {
			rows, err = o.claim(ctx, q, r)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &batch[Tx]{o: o, rows: rows}, nil
}

// claimHeld claims in a transaction that the batch holds, with the heads'
// locks, until Complete or Release; on a Holder, BEGIN goes with the claim
// statement. A claim that finds nothing rolls back (it wrote nothing).
func (o *Outbox[Tx]) claimHeld(ctx context.Context, r Claim) (Batch, error) {
	h, err := o.c.hold(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := o.claim(ctx, h, r)
	if err != nil || len(rows) == 0 {
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		if rerr := h.Rollback(rctx); err == nil {
			err = rerr
		}
		if err != nil {
			return nil, err
		}
		return &batch[Tx]{o: o}, nil
	}
	return &batch[Tx]{o: o, rows: rows, h: h}, nil
}

// scanOutbox reads an outbox row. Headers that do not parse, or a row
// that check.OutboxMessage refuses (another writer's), give the row
// Invalid rather than an error: the relay quarantines it, and the claim
// goes on with the other rows.
func scanOutbox(rs interface{ Scan(...any) error }, r *outbox.Row, extra ...any) error {
	var h string
	var state int
	dest := []any{&r.RowID, &r.ID, &r.AggregateID, &r.Version, &r.Sequence, &r.Type, &h, &r.Payload, &state, &r.Attempts,
		timeDest{&r.CreatedAt}, timeDest{&r.NextAttempt}, &r.LastError, nullTimeDest{&r.SentAt}}
	if err := rs.Scan(append(dest, extra...)...); err != nil {
		return err
	}
	r.State = outbox.State(state)
	DecodeRow(r, h, nil) // a row that does not decode is returned, Invalid
	return nil
}

// batch is a claimed batch: in SkipLocked mode it holds the claiming
// transaction (and the row locks) until Complete or Release.
type batch[Tx any] struct {
	o      *Outbox[Tx]
	rows   []outbox.Row
	h      Held // the claiming transaction, if held
	done   bool
	keeper *leaseKeeper[Tx] // lease mode: renews the lease while held
}

func (b *batch[Tx]) Rows() []outbox.Row { return b.rows }

func (b *batch[Tx]) Lost() context.Context {
	if b.keeper == nil {
		return nil
	}
	return b.keeper.lost
}

func (b *batch[Tx]) Complete(ctx context.Context, sent []int64, failed []seam.OutboxFailure, at time.Time) error {
	if b.done {
		return fmt.Errorf("idem: outbox batch already finished")
	}
	b.done = true
	if len(sent) == 0 && len(failed) == 0 {
		return b.Release(ctx)
	}
	o := b.o
	if b.keeper != nil {
		b.keeper.halt()
	}
	stmts := o.markStmts(sent, failed, at)
	if b.h != nil {
		// One round trip on a Holder: the marks, then COMMIT, which a
		// failed mark keeps from running.
		h := b.h
		b.h = nil
		return h.CommitWith(ctx, stmts)
	}
	return o.c.inTx(ctx, func(q Querier) error {
		if b.keeper != nil {
			// Only the lease holder marks: check and extend it in the
			// marking transaction.
			if ok, err := b.keeper.renew(ctx, q, at); err != nil || !ok {
				return cmp.Or(err, outbox.ErrLeaseLost)
			}
		}
		for _, s := range stmts {
			if _, err := q.Exec(ctx, s.SQL, s.Args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// markStmts are the statements that mark sent as sent and record failed.
func (o *Outbox[Tx]) markStmts(sent []int64, failed []seam.OutboxFailure, at time.Time) []Stmt {
	var stmts []Stmt
	switch {
	case len(sent) == 0:
	case o.markSent != "":
		stmts = append(stmts, Stmt{o.markSent, []any{o.c.d.Time(at), sent}})
	default:
		for chunk := range slices.Chunk(sent, 500) {
			args := []any{o.c.d.Time(at)}
			ph := make([]string, len(chunk))
			for i, id := range chunk {
				args = append(args, id)
				ph[i] = "$" + strconv.Itoa(len(args))
			}
			stmts = append(stmts, Stmt{o.c.render(o.q.sent + strings.Join(ph, ", ") + ")"), args})
		}
	}
	for _, f := range failed {
		state := outbox.Pending
		next := f.NextAttempt
		if f.Quarantine {
			state, next = outbox.Quarantined, at
		}
		stmts = append(stmts, Stmt{o.q.failed, []any{f.RowID, f.Error, o.c.d.Time(next), int(state)}})
	}
	return stmts
}

// FailStmts are the statements that record failed.
func (o *Outbox[Tx]) FailStmts(failed []seam.OutboxFailure, at time.Time) []Stmt {
	return o.markStmts(nil, failed, at)
}

func (b *batch[Tx]) Release(ctx context.Context) error {
	b.done = true
	if b.keeper != nil {
		b.keeper.halt()
	}
	if h := b.h; h != nil {
		b.h = nil
		return h.Rollback(ctx)
	}
	return nil
}

// read runs f outside a write transaction where the dialect can.
func (o *Outbox[Tx]) read(ctx context.Context, f func(q Querier) error) error {
	if o.d.Read != nil {
		return o.d.Read(ctx, f)
	}
	return o.c.inTx(ctx, f)
}

// ReleaseOutbox gives up the lease owner holds, so that another relay
// can take over at once.
func (o *Outbox[Tx]) ReleaseOutbox(ctx context.Context, owner string) error {
	if o.d.SkipLocked {
		return nil
	}
	if o.d.Read != nil { // write only if owner holds the lease
		var n int64
		err := o.d.Read(ctx, func(q Querier) error {
			return q.QueryRow(ctx, o.c.render(`SELECT count(*) FROM {{relay_lease}} WHERE name = 'outbox' AND owner = $1`), owner).Scan(&n)
		})
		if err != nil || n == 0 {
			return err
		}
	}
	return o.c.inTx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, o.q.release, owner)
		return err
	})
}

// OutboxHealth implements the relay's part (outbox's relayStore).
func (o *Outbox[Tx]) OutboxHealth(ctx context.Context, now time.Time) (outbox.Health, error) {
	var h outbox.Health
	err := o.read(ctx, func(q Querier) error {
		return q.QueryRow(ctx, o.q.health).Scan(&h.Backlog, &h.Retrying, &h.Quarantined, nullTimeDest{&h.OldestUnsent})
	})
	if err == nil && !h.OldestUnsent.IsZero() {
		h.OldestUnsentAge = max(now.Sub(h.OldestUnsent), 0)
	}
	return h, err
}

// ListOutbox implements the relay's part (outbox's relayStore).
func (o *Outbox[Tx]) ListOutbox(ctx context.Context, f outbox.Filter) ([]outbox.Row, error) {
	var w []string
	var args []any
	if len(f.States) > 0 {
		w = append(w, "state IN ("+states(&args, f.States)+")")
	}
	if f.AggregateID != "" {
		w = append(w, "aggregate_id = "+bind(&args, f.AggregateID))
	}
	if f.AfterRow > 0 {
		w = append(w, "id > "+bind(&args, f.AfterRow))
	}
	q := o.q.list
	if f.NoPayload {
		q = o.q.listNoPayload
	}
	if len(w) > 0 {
		q += " WHERE " + strings.Join(w, " AND ")
	}
	q += " ORDER BY id"
	if f.Limit > 0 {
		q += " LIMIT " + bind(&args, f.Limit)
	}
	var out []outbox.Row
	err := o.read(ctx, func(qr Querier) error {
		rs, err := qr.Query(ctx, o.c.d.Rebind(q), args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r outbox.Row
			if err := scanOutbox(rs, &r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rs.Err()
	})
	return out, err
}

// states appends ss to args and returns their placeholders.
func states(args *[]any, ss []outbox.State) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = bind(args, int(s))
	}
	return strings.Join(parts, ", ")
}

// bind appends v to args and returns its placeholder: SQL text is never
// built from a value.
func bind(args *[]any, v any) string {
	*args = append(*args, v)
	return "$" + strconv.Itoa(len(*args))
}

// SetOutboxState implements the relay's part (outbox's relayStore).
func (o *Outbox[Tx]) SetOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error) {
	var q string
	switch to {
	case outbox.Pending:
		q = o.q.requeue
	case outbox.Discarded:
		q = o.q.discard
	default:
		return false, fmt.Errorf("idem: cannot set an outbox row to %s", to)
	}
	if len(from) == 0 {
		return false, nil
	}
	var n int64
	err := o.c.inTx(ctx, func(qr Querier) error {
		var err error
		args := []any{rowID, o.c.d.Time(at)}
		n, err = qr.Exec(ctx, o.c.render(q+states(&args, from)+")"), args...)
		return err
	})
	return n == 1, err
}

// PurgeOutbox implements the relay's part (outbox's relayStore).
func (o *Outbox[Tx]) PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := o.c.inTx(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, o.q.purge, o.c.d.Time(before), limit)
		return err
	})
	return int(n), err
}

// nullTimeDest scans a nullable time; NULL is the zero time.
type nullTimeDest struct{ t *time.Time }

func (d nullTimeDest) Scan(src any) error {
	if src == nil {
		*d.t = time.Time{}
		return nil
	}
	return timeDest(d).Scan(src)
}
