package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestClaimReadsWhatItClaims: the claim's plan reads about as many outbox
// rows as it claims, whatever the planner's statistics, so that its cost
// does not grow with the backlog. The statistics here are stale on
// purpose (taken while the outbox was empty, as on a relay that started
// with little backlog and fell behind), and the plan is the generic one a
// prepared statement settles on, and the custom one. Joined plainly, the
// heads and their rows made a generic plan that hashed every pending row
// and read every pending row of each claimed aggregate: 20,000 rows read
// for a claim of 500.
func TestClaimReadsWhatItClaims(t *testing.T) {
	var tr claimTracer
	pool := newPoolConfig(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = &tr })
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE wary_outbox"); err != nil {
		t.Fatal(err)
	}
	const aggs, perAgg = 100, 200 // a backlog of 20,000 rows
	tx, err := idemtest.D(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]outbox.Message, 0, aggs*perAgg)
	for i := range aggs * perAgg {
		msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("m%d", i), AggregateID: fmt.Sprintf("agg-%03d", i%aggs), Payload: []byte("{}")})
	}
	if _, err := idemtest.D(st).AddOutbox(ctx, tx, msgs, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := idemtest.D(st).Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	b, err := postgres.ClaimOutbox(ctx, st, sqlcore.Claim{Owner: "plan", Now: time.Now(), Limit: 500, PerAggregate: 10})
	if err != nil {
		t.Fatal(err)
	}
	claimed := len(b.Rows())
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if claimed != 500 {
		t.Fatalf("claimed %d rows, want 500", claimed)
	}
	sql, args := tr.claim()
	if sql == "" {
		t.Fatal("the claim statement was not traced")
	}
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		read, rows := explainRead(t, pool, mode, sql, args)
		if rows != claimed {
			t.Errorf("%s: EXPLAIN ANALYZE returned %d rows, the claim %d", mode, rows, claimed)
		}
		// Per aggregate: a step of the skip scan, its lowest unsent row,
		// the head locked, then its rows: about 8 reads per 5 rows.
		if read > 3*claimed {
			t.Errorf("%s: the claim of %d rows read %d outbox rows on a backlog of %d; want at most %d", mode, claimed, read, aggs*perAgg, 3*claimed)
		}
		t.Logf("%s: %d rows claimed, %d read", mode, claimed, read)
	}
}

// explainRead runs EXPLAIN ANALYZE of sql in a transaction rolled back,
// under plan_cache_mode mode, and returns how many outbox rows its scans
// read (returned or removed by a filter, over all loops) and how many rows
// the statement returned.
func explainRead(t *testing.T, pool *pgxpool.Pool, mode, sql string, args []any) (read, rows int) {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output: %v: %s", err, out)
	}
	var walk func(n *planNode)
	walk = func(n *planNode) {
		if n.Relation == "wary_outbox" {
			read += int(n.Loops * (n.Rows + n.RemovedByFilter + n.RemovedByRecheck))
		}
		read += int(n.Loops * n.RemovedByJoinFilter)
		for i := range n.Plans {
			walk(&n.Plans[i])
		}
	}
	walk(&plans[0].Plan)
	return read, int(plans[0].Plan.Rows)
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Relation            string     `json:"Relation Name"`
	Rows                float64    `json:"Actual Rows"`
	Loops               float64    `json:"Actual Loops"`
	RemovedByFilter     float64    `json:"Rows Removed by Filter"`
	RemovedByRecheck    float64    `json:"Rows Removed by Index Recheck"`
	RemovedByJoinFilter float64    `json:"Rows Removed by Join Filter"`
	Plans               []planNode `json:"Plans"`
}

// claimTracer keeps the last claim statement a pool sent, and its
// arguments (the claim goes behind BEGIN, as a batch).
type claimTracer struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (c *claimTracer) claim() (string, []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sql, c.args
}

func (c *claimTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.HasPrefix(strings.TrimSpace(d.SQL), "WITH RECURSIVE") {
		c.mu.Lock()
		c.sql, c.args = d.SQL, d.Args
		c.mu.Unlock()
	}
}

func (*claimTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (*claimTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
func (*claimTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (*claimTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
