package postgres_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// heldStore is a store on pool with n rows added, on aggregates a and b.
func heldStore(t *testing.T, pool *pgxpool.Pool, n int) *postgres.Store {
	t.Helper()
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := idemtest.D(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("m%d", i), AggregateID: string(rune('a' + i%2)), Payload: []byte("{}")})
	}
	if _, err := idemtest.D(st).AddOutbox(ctx, tx, msgs, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := idemtest.D(st).Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	return st
}

// claimAll claims a batch and checks it has want rows; it returns their
// IDs.
func claimAll(t *testing.T, st *postgres.Store, owner string, want int) (sqlcore.Batch, []int64) {
	t.Helper()
	b, err := postgres.ClaimOutbox(t.Context(), st, sqlcore.Claim{Owner: owner, Now: time.Now(), Limit: 100, PerAggregate: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b.Rows()); got != want {
		t.Fatalf("claimed %d rows, want %d", got, want)
	}
	var ids []int64
	for _, r := range b.Rows() {
		ids = append(ids, r.RowID)
	}
	return b, ids
}

// sentRows checks that st has want rows sent.
func sentRows(t *testing.T, st *postgres.Store, want int) {
	t.Helper()
	rows, err := idemtest.D(st).ListOutbox(t.Context(), outbox.Filter{States: []outbox.State{outbox.Sent}})
	if err != nil || len(rows) != want {
		t.Errorf("sent rows: %d, %v; want %d", len(rows), err, want)
	}
}

// TestHeldBatchRoundTrips: on PostgreSQL a claimed batch costs two round
// trips, BEGIN with the claim and the mark with COMMIT, and a claim that
// finds nothing two (BEGIN with the claim, ROLLBACK). The connection goes
// back to the pool.
func TestHeldBatchRoundTrips(t *testing.T) {
	var n atomic.Int64
	pool := countingPool(t, &n)
	st := heldStore(t, pool, 4)
	ctx := t.Context()
	// Once, so that pgx's statement cache holds the statements (a new
	// statement costs a round trip to prepare it).
	b, _ := claimAll(t, st, "warm", 4)
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	start := n.Load()
	b, ids := claimAll(t, st, "r", 4)
	if err := b.Complete(ctx, ids[:3], []seam.OutboxFailure{{RowID: ids[3], Error: "x", NextAttempt: time.Now().Add(time.Hour)}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := n.Load() - start; got != 2 {
		t.Errorf("claim and mark: %d round trips, want 2", got)
	}
	start = n.Load()
	claimAll(t, st, "r", 0)
	if got := n.Load() - start; got != 2 {
		t.Errorf("empty claim: %d round trips, want 2", got)
	}
	if a := pool.Stat().AcquiredConns(); a != 0 {
		t.Errorf("%d connections still acquired", a)
	}
	sentRows(t, st, 3)
}

// TestHeldBatchFailedMark: when a statement of Complete fails (here the
// failure's error text holds a NUL byte, which PostgreSQL refuses), the
// marks before it are not committed, Complete returns the error, and the
// heads are free for the next claim; the connection goes back to the pool.
// Both with pgx's default protocol and the simple protocol (a batch is
// then one multi-statement query).
func TestHeldBatchFailedMark(t *testing.T) {
	for _, simple := range []bool{false, true} {
		t.Run(fmt.Sprintf("simple=%v", simple), func(t *testing.T) {
			pool := newPool(t)
			if simple {
				cfg := pool.Config()
				cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
				var err error
				if pool, err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
			}
			st := heldStore(t, pool, 4)
			ctx := t.Context()
			b, ids := claimAll(t, st, "r", 4)
			bad := []seam.OutboxFailure{{RowID: ids[2], Error: "nul \x00 byte", NextAttempt: time.Now()}}
			if err := b.Complete(ctx, ids[:2], bad, time.Now()); err == nil {
				t.Fatal("Complete with a failing mark returned no error")
			}
			if a := pool.Stat().AcquiredConns(); a != 0 {
				t.Errorf("%d connections still acquired", a)
			}
			sentRows(t, st, 0)
			b, ids = claimAll(t, st, "r2", 4)
			if err := b.Complete(ctx, ids, nil, time.Now()); err != nil {
				t.Fatal(err)
			}
			sentRows(t, st, 4)
		})
	}
}

// TestHeldCommitsAsynchronously: a relay batch's transaction commits with
// synchronous_commit off (its marks may be lost in a server crash, which
// republishes the rows), and only that transaction: the setting does not
// outlive it on the pooled connection that producers use next.
func TestHeldCommitsAsynchronously(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "CREATE TABLE probe (setting text)"); err != nil {
		t.Fatal(err)
	}
	if err := postgres.CommitHeld(ctx, pool, "INSERT INTO probe SELECT current_setting('synchronous_commit')"); err != nil {
		t.Fatal(err)
	}
	var inBatch string
	if err := pool.QueryRow(ctx, "SELECT setting FROM probe").Scan(&inBatch); err != nil {
		t.Fatal(err)
	}
	if inBatch != "off" {
		t.Fatalf("synchronous_commit in the batch's transaction: %q, want off", inBatch)
	}
	// The batch's connection is idle in the pool again, among these.
	conns := pool.AcquireAllIdle(ctx)
	if len(conns) == 0 {
		t.Fatal("no idle connection")
	}
	for _, c := range conns {
		var after string
		err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&after)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
		if after != "on" {
			t.Fatalf("synchronous_commit on a pooled connection after the batch: %q, want on", after)
		}
	}
}
