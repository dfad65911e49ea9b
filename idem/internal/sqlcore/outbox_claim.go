package sqlcore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// Claim is a claim request.
type Claim struct {
	Owner        string
	Now          time.Time
	Limit        int
	PerAggregate int
	// Aggregates, if positive and below Limit, is the most aggregates
	// (heads) the claim takes; their rows still fill up to Limit, at most
	// PerAggregate each.
	Aggregates int
	// Lease is how long a claim by lease (SQLite) lasts when its owner
	// goes silent.
	Lease time.Duration
}

// Batch is a claimed set of rows. Exactly one of Complete and Release
// must be called.
type Batch interface {
	// Rows are the claimed rows, each aggregate's in sequence order.
	Rows() []outbox.Row
	// Complete marks sent as sent and records failed, in one transaction,
	// and releases the claim.
	Complete(ctx context.Context, sent []int64, failed []seam.OutboxFailure, at time.Time) error
	// Release releases the claim and records nothing.
	Release(ctx context.Context) error
	// Lost is done once a lease renewal found the lease gone (nil for a
	// claim that holds no lease).
	Lost() context.Context
}

// claimQuery claims in one statement. Its CTE h finds claimable heads
// without reading the backlog: a recursive skip scan over the
// unsent-rows index visits one aggregate per step (the next aggregate ID
// with an unsent row after $1, and at most $5 if below), at most $2 of them,
// and takes each one's lowest unsent row if it is pending and due at $3,
// up to $4 heads. Its cost grows with the aggregates visited, not with
// their rows: a claim that starts where the last one stopped visits about
// as many aggregates as it claims, plus those whose head another relay
// holds or that back off. The statement returns, with each head's
// sequence and rank, the pending rows that follow each head: per
// aggregate at most the next-to-last parameter, and the last one (the
// rows wanted) divided by the heads. A claimed head owns its aggregate
// (its later rows are marked only by a relay holding it), so the
// statement's snapshot shows them as they are.
//
// With SkipLocked (PostgreSQL) the heads are locked, and a head another
// relay holds is skipped; the lock is taken on the latest row version, so
// a head marked sent since the statement began is skipped too (state is
// checked again). There each head, and each head's following rows, are
// read in a LATERAL subquery: the locking one is a fence the planner
// cannot flatten, and the other stops at its LIMIT, so the plan reads
// O(rows claimed) whatever the statistics say. Joined plainly, a generic
// plan made with statistics from when the outbox was small hashed every
// pending row to find the heads, and read every pending row of each
// claimed aggregate to keep the few below the bound (BENCHMARKS.md:
// 13,420 and 12,920 rows read for a claim of 500, 46 ms).
//
// The heads carry no ORDER BY: the recursive scan yields aggregates in
// step order and the nested loop keeps it, so LIMIT stops the scan after
// $4 heads (an ORDER BY sorted all $2 visited aggregates first: 416
// index steps for a claim of 100 on distinct aggregates, 9-11 ms instead
// of 2-3). Should a plan ever yield them in another order, the claim
// still holds only true heads; the cursor (the highest rank claimed) may
// then pass over some, which the wrap-around reaches. k is materialized:
// inlined, its count of h ran once per joined row.
//
// A claim from the first aggregate (first, and below: its $1 is always
// "") starts at $1 itself, so that a row whose aggregate ID is empty (no
// Add writes one; another writer can) is claimed too, and quarantined
// (outbox.Row.Invalid) rather than left in the table unseen.
func claimQuery(skipLocked, below, first bool) string {
	bound, per, rows := "", "$5", "$6"
	if below {
		bound, per, rows = " AND aggregate_id <= $5", "$6", "$7"
	}
	from := " > $1"
	if first || below {
		from = " >= $1"
	}
	q := `WITH RECURSIVE a(agg, n) AS (
		SELECT (SELECT MIN(aggregate_id) FROM {{outbox}} WHERE state IN (0, 2) AND aggregate_id` + from + bound + `), 1
		UNION ALL
		SELECT (SELECT MIN(aggregate_id) FROM {{outbox}} WHERE state IN (0, 2) AND aggregate_id > a.agg` + bound + `), a.n + 1
		FROM a WHERE a.agg IS NOT NULL AND a.n < $2),`
	head := `(SELECT MIN(sequence) FROM {{outbox}} WHERE aggregate_id = a.agg AND state IN (0, 2))`
	// k: how many rows each head takes (no division when there is no head).
	k := `k AS MATERIALIZED (SELECT CASE WHEN ` + per + ` * COUNT(*) < ` + rows + ` THEN ` + per + ` ELSE ` + rows + ` / COUNT(*) END AS take FROM h)`
	cols := strings.Split(outboxCols, ",")
	for i, c := range cols {
		cols[i] = "r." + strings.TrimSpace(c)
	}
	sel := `
	SELECT ` + strings.Join(cols, ", ") + `, h.seq, h.n FROM h CROSS JOIN k `
	if skipLocked {
		return q + `
	h AS (SELECT o.aggregate_id AS agg, o.sequence AS seq, a.n AS n FROM a CROSS JOIN LATERAL (
		SELECT o.aggregate_id, o.sequence FROM {{outbox}} o WHERE o.aggregate_id = a.agg AND o.sequence = ` + head + `
			AND o.state = 0 AND o.next_attempt <= $3
		FOR UPDATE SKIP LOCKED) o
	LIMIT $4),
	` + k + sel + `CROSS JOIN LATERAL (
		SELECT * FROM {{outbox}} r WHERE r.aggregate_id = h.agg AND r.sequence >= h.seq AND r.sequence < h.seq + k.take
			AND r.state = 0
		ORDER BY r.sequence LIMIT k.take) r`
	}
	return q + `
	h AS (SELECT o.aggregate_id AS agg, o.sequence AS seq, a.n AS n FROM a JOIN {{outbox}} o ON o.aggregate_id = a.agg
		AND o.sequence = ` + head + `
	WHERE o.state = 0 AND o.next_attempt <= $3
	LIMIT $4),
	` + k + sel + `JOIN {{outbox}} r ON r.aggregate_id = h.agg
		AND r.sequence >= h.seq AND r.sequence < h.seq + k.take
	WHERE r.state = 0`
}

// visit is how many aggregates a claim of limit heads looks at, at most:
// enough to step over those whose head is held or backing off.
func visit(limit int) int { return 4*limit + 16 }

// claimed is a claim query's rows with their heads' sequences and ranks.
type claimed struct {
	rows  []outbox.Row
	heads int
	seq   map[string]int64 // each aggregate's head
	rank  map[string]int   // each aggregate's order in the claim
	top   int              // the highest rank
}

// run runs a claim query, adding to c.
func (c *claimed) run(ctx context.Context, q Querier, query string, args []any) error {
	rs, err := q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	base := c.top // ranks of a second query follow the first's
	for rs.Next() {
		var r outbox.Row
		var seq, n int64
		if err := scanOutbox(rs, &r, &seq, &n); err != nil {
			return err
		}
		if _, ok := c.seq[r.AggregateID]; !ok {
			c.seq[r.AggregateID], c.rank[r.AggregateID] = seq, base+int(n)
			c.heads++
			c.top = max(c.top, base+int(n))
		}
		c.rows = append(c.rows, r)
	}
	return rs.Err()
}

// claim reads the rows to claim (locking their heads in SkipLocked mode),
// starting after the aggregate where the last claim stopped, so that every
// aggregate's turn comes.
func (o *Outbox[Tx]) claim(ctx context.Context, q Querier, r Claim) ([]outbox.Row, error) {
	now := o.c.d.Time(r.Now)
	rows, per := max(r.Limit, 1), max(r.PerAggregate, 1)
	limit := rows // heads
	if r.Aggregates > 0 {
		limit = min(limit, r.Aggregates)
	}
	o.mu.Lock()
	from := o.cursor
	o.mu.Unlock()
	c := &claimed{seq: map[string]int64{}, rank: map[string]int{}}
	query := o.q.claim
	if from == "" {
		query = o.q.claimFirst
	}
	err := c.run(ctx, q, query, []any{from, visit(limit), now, limit, per, rows})
	if err == nil && c.heads < limit && len(c.rows) < rows && from != "" {
		// Wrap around: the aggregates up to where this claim started, that
		// one included (its next rows may be all that is left).
		err = c.run(ctx, q, o.q.claimBelow, []any{"", visit(limit), now, limit - c.heads, from, per, rows - len(c.rows)})
	}
	if err != nil || c.heads == 0 {
		return nil, err
	}
	last := "" // the last head in the claim's order
	for a, n := range c.rank {
		if n == c.top {
			last = a
		}
	}
	o.mu.Lock()
	if c.heads == limit {
		o.cursor = last
	} else {
		o.cursor = ""
	}
	o.mu.Unlock()
	// Round-robin over aggregates up to rows rows, then group each
	// aggregate's rows in sequence order, aggregates in head order.
	all, order := c.rows, c.rank
	rank := func(r outbox.Row) int64 { return r.Sequence - c.seq[r.AggregateID] }
	slices.SortFunc(all, func(a, b outbox.Row) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return int(ra - rb)
		}
		return order[a.AggregateID] - order[b.AggregateID]
	})
	all = all[:min(len(all), rows)]
	slices.SortFunc(all, func(a, b outbox.Row) int {
		if oa, ob := order[a.AggregateID], order[b.AggregateID]; oa != ob {
			return oa - ob
		}
		return int(a.Sequence - b.Sequence)
	})
	return all, nil
}
