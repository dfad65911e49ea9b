package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/wary-go/wary/broker"
	"slices"
	"time"

	"github.com/wary-go/wary/idem/outbox"
)

// addOne is the adding transaction's single statement where the dialect
// has OneStatementAdd (PostgreSQL): it upserts the aggregates' sequence
// counters, inserts the rows and, if the dialect has WakeNotify, takes the
// wake lock and notifies waiting relays, all in one round trip. Values
// travel as arrays, one parameter per column, so the statement's text is
// the same whatever the number of rows (one prepared statement per
// connection) and no add needs chunking:
//
//	$1 the aggregates, sorted; $2 their number of rows
//	$3..$8 per row: message ID, aggregate, version, back (how many rows
//	of its aggregate follow it in this add), type, headers; $9 payloads
//	$10 the time; $11 the wake lock's key; $12 the channel
//
// c upserts the counters in the order of $1, which is aggregate order:
// INSERT ... SELECT processes the rows the ORDER BY hands it one at a
// time (the planner may drop the sort: WITH ORDINALITY already yields that
// order), and ON CONFLICT locks each counter row as it meets it, so two
// adding transactions lock their common counters in the same order and
// cannot deadlock, as with the VALUES list of the two-statement path
// (TestAddLocksCountersInOrder in idem/postgres fails if they are locked
// in reverse). PostgreSQL's documentation ("Data-Modifying Statements in
// WITH", https://www.postgresql.org/docs/current/queries-with.html): such
// a statement is executed exactly once and always to completion, whether
// or not the primary query reads its output; all parts of the statement
// see the same snapshot, so ins sees c's effect only through c's RETURNING
// rows, which is how it computes a row's sequence: its counter's new
// value minus back. The main query returns one row per aggregate, for the
// caller's sequences, with the number of rows inserted; the wake-up (%s,
// an uncorrelated subquery) is evaluated once, for the first row.
const addOne = `WITH c AS (
		INSERT INTO {{outbox_aggregates}} AS a (aggregate_id, last_sequence)
		SELECT u.aggregate_id, u.n FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS u(aggregate_id, n, i)
		ORDER BY u.i
		ON CONFLICT (aggregate_id) DO UPDATE SET last_sequence = a.last_sequence + excluded.last_sequence
		RETURNING aggregate_id, last_sequence),
	ins AS (
		INSERT INTO {{outbox}} (message_id, aggregate_id, version, sequence, type, headers, payload, created_at, next_attempt)
		SELECT m.message_id, m.aggregate_id, m.version, c.last_sequence - m.back, m.type, m.headers, m.payload,
			$10::timestamptz, $10::timestamptz
		FROM unnest($3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::bytea[])
			WITH ORDINALITY AS m(message_id, aggregate_id, version, back, type, headers, payload, i)
		JOIN c ON c.aggregate_id = m.aggregate_id
		ORDER BY m.i
		RETURNING 1)
	SELECT c.aggregate_id, c.last_sequence, (SELECT count(*) FROM ins), %s FROM c`

// addSingle is addOne for a single row, the common case: the same
// statement with scalar parameters and no arrays, join, sort or WITH
// ORDINALITY, which costs the server less (BenchmarkAddSerial in
// idem/postgres measures it). $1 aggregate, $2 message ID, $3 version,
// $4 type, $5 headers, $6 payload, $7 time, $8 wake key, $9 channel; it
// returns the row's sequence. The wake-up, in RETURNING, is evaluated
// once, for the one row.
const addSingle = `WITH c AS (
		INSERT INTO {{outbox_aggregates}} AS a (aggregate_id, last_sequence) VALUES ($1::text, 1)
		ON CONFLICT (aggregate_id) DO UPDATE SET last_sequence = a.last_sequence + 1
		RETURNING last_sequence)
	INSERT INTO {{outbox}} (message_id, aggregate_id, version, sequence, type, headers, payload, created_at, next_attempt)
	SELECT $2::text, $1::text, $3::bigint, c.last_sequence, $4::text, $5::text, $6::bytea, $7::timestamptz, $7::timestamptz
	FROM c
	RETURNING sequence, %s`

// addOneStatement is AddOutbox in one statement (see addOne).
//
// The wake-up. In the two-statement path the first statement takes the
// wake lock shared and the last one reads the wake flags, with a snapshot
// of its own taken after the lock was granted (see IdleOutbox). Here one
// statement does both, so the flags cannot be read by the statement
// itself: its snapshot is taken when it starts, perhaps while it still has
// to wait for the lock behind a relay that is setting its flag. The
// dialect's WakeNotify calls a VOLATILE PL/pgSQL function instead
// (<prefix>outbox_wake_notify, migration 007) that takes the lock with one
// command and reads the flags with a later one. PostgreSQL's documentation
// ("Function Volatility Categories",
// https://www.postgresql.org/docs/current/xfunc-volatility.html): "STABLE
// and IMMUTABLE functions use a snapshot established as of the start of
// the calling query, whereas VOLATILE functions obtain a fresh snapshot at
// the start of each query they execute". Under READ COMMITTED that fresh
// snapshot is taken after the lock was granted, which is all IdleOutbox's
// argument needs of the statement that reads the flags; under REPEATABLE
// READ or SERIALIZABLE every query uses the transaction's snapshot, and
// the function always notifies, as before. TestWakeAddWaitsForIdle
// (idem/postgres) holds the lock in a relay going idle while an add waits
// for it, and fails if the add does not notify.
func (o *Outbox[Tx]) addOneStatement(ctx context.Context, q Querier, msgs []outbox.Message, at time.Time) ([]int64, error) {
	if len(msgs) == 1 {
		return o.addSingleRow(ctx, q, msgs[0], at)
	}
	count := map[string]int64{}
	for _, m := range msgs {
		count[m.AggregateID]++
	}
	aggs := make([]string, 0, len(count))
	ns := make([]int64, 0, len(count))
	for a := range count {
		aggs = append(aggs, a)
	}
	slices.Sort(aggs)
	for _, a := range aggs {
		ns = append(ns, count[a])
	}
	n := len(msgs)
	ids, aggOf, types, headers := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, backs := make([]int64, n), make([]int64, n)
	payloads := make([][]byte, n)
	seen := make(map[string]int64, len(count)) // rows of each aggregate so far
	for i, m := range msgs {
		seen[m.AggregateID]++
		ids[i], aggOf[i], types[i], versions[i] = m.ID, m.AggregateID, m.Type, m.Version
		backs[i] = count[m.AggregateID] - seen[m.AggregateID]
		var err error
		if headers[i], err = headerText(m.Headers); err != nil {
			return nil, err
		}
		payloads[i] = payloadOf(m)
	}
	args := []any{aggs, ns, ids, aggOf, versions, backs, types, headers, payloads, o.c.d.Time(at)}
	stmt := o.q.addOne
	if o.q.wakeNotify != "" {
		args = append(args, o.wakeKey, o.channel)
	}
	rs, err := q.Query(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	defer rs.Close()
	last := make(map[string]int64, len(aggs))
	var inserted int64
	for rs.Next() {
		var a string
		var l int64
		var wake any
		if err := rs.Scan(&a, &l, &inserted, &wake); err != nil {
			return nil, fmt.Errorf("add: %w", err)
		}
		last[a] = l
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	if len(last) != len(aggs) || inserted != int64(n) {
		return nil, fmt.Errorf("add: %d counters for %d aggregates, %d rows for %d messages", len(last), len(aggs), inserted, n)
	}
	// The rows of one aggregate take its sequences in the order of msgs,
	// ending at its counter's new value.
	seqs := make([]int64, n)
	for i, m := range msgs {
		seqs[i] = last[m.AggregateID] - backs[i]
	}
	return seqs, nil
}

// addSingleRow is addOneStatement for one message (see addSingle).
func (o *Outbox[Tx]) addSingleRow(ctx context.Context, q Querier, m outbox.Message, at time.Time) ([]int64, error) {
	h, err := headerText(m.Headers)
	if err != nil {
		return nil, err
	}
	args := []any{m.AggregateID, m.ID, m.Version, m.Type, h, payloadOf(m), o.c.d.Time(at)}
	if o.q.wakeNotify != "" {
		args = append(args, o.wakeKey, o.channel)
	}
	var seq int64
	var wake any
	if err := q.QueryRow(ctx, o.q.addSingle, args...).Scan(&seq, &wake); err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	return []int64{seq}, nil
}

// headerText is a row's headers column: JSON, "{}" if there are none.
func headerText(h broker.Headers) (string, error) {
	if len(h) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(h)
	return string(b), err
}

// payloadOf is a row's payload column, never NULL.
func payloadOf(m outbox.Message) []byte {
	if m.Payload == nil {
		return []byte{}
	}
	return m.Payload
}
