package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// BenchmarkOutboxLayouts: the outbox's add and the polling relay's claim
// on four layouts, each on a database of its own, interleaved in rounds
// (the order of the layouts turns by one each round):
//   - "pre010": the schema before migration 010, a plain table (built by
//     applying the migrations below 010 only);
//   - "010": 010's partitioned outbox with its one current slice, the
//     default of every store from 010 to 014;
//   - "plain": the default since 015, a plain table again;
//   - "sliced": Options.OutboxSlice since 015, after a rotation (the
//     current table one a rotation created, the previous one holding
//     5,000 sent rows).
//
// Each layout starts with 5,000 pending rows over 500 aggregates. A round
// runs, per layout, 100 transactions of one row (over 100 aggregates),
// then 20 claims of up to 100 rows (10 per aggregate), released, so that
// every claim finds the backlog (a claim that reaches the last aggregate
// takes fewer: the same sequence of claims on every layout). Reported per layout: the wall time and
// the server's CPU time (its backends' on-CPU time, from
// /proc/<pid>/schedstat: the machine's load moves it much less) per add
// transaction and per claim.
func BenchmarkOutboxLayouts(b *testing.B) {
	ctx := b.Context()
	names := []string{"pre010", "010", "plain", "sliced"}
	type layout struct {
		st   *postgres.Store
		pool *pgxpool.Pool
	}
	ls := make([]layout, len(names))
	aggs := make([]string, 5000)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("a%03d", i%500)
	}
	for i, n := range names {
		var pool *pgxpool.Pool
		var st *postgres.Store
		var err error
		switch n {
		case "pre010", "010":
			pool, st = storeBefore(b, map[string]int{"pre010": 10, "010": 15}[n])
		case "plain":
			pool = newPrivatePool(b)
			st, err = postgres.New(ctx, pool, nil)
		case "sliced":
			pool = newPrivatePool(b)
			if st, err = postgres.New(ctx, pool, &postgres.Options{OutboxSlice: time.Minute}); err == nil {
				addAt(b, st, t0.Add(-time.Hour), aggs)
				_, err = pool.Exec(ctx, "UPDATE wary_outbox SET state = 1, sent_at = $1", t0.Add(-time.Hour))
				if err == nil {
					rotate(b, st, t0, t0.Add(-2*time.Hour))
				}
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		addAt(b, st, t0, aggs)
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
			b.Fatal(err)
		}
		ls[i] = layout{st: st, pool: pool}
	}
	add := func(l layout, j int) {
		tx, err := idemtest.D(l.st).Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		msg := outbox.Message{ID: fmt.Sprintf("m%d", j), AggregateID: fmt.Sprint("agg-", j%100), Type: "t", Payload: []byte("x")}
		if _, err := idemtest.D(l.st).AddOutbox(ctx, tx, []outbox.Message{msg}, t0); err != nil {
			b.Fatal(err)
		}
		if err := idemtest.D(l.st).Commit(ctx, tx); err != nil {
			b.Fatal(err)
		}
	}
	var claimed [4]int // rows claimed: the same sequence of claims on each layout
	claim := func(i int) {
		batch, err := postgres.ClaimOutbox(ctx, ls[i].st, sqlcore.Claim{Owner: "b", Now: t0.Add(time.Hour), Limit: 100, PerAggregate: 10})
		if err != nil {
			b.Fatal(err)
		}
		n := len(batch.Rows())
		// Released before anything else: its transaction is open.
		if err := batch.Release(ctx); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatalf("%s: claimed no row", names[i])
		}
		claimed[i] += n
	}
	// The server's CPU time: every backend of the layout's database.
	serverCPU := func(l layout) time.Duration {
		rows, err := l.pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
		if err != nil {
			b.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			b.Fatal(err)
		}
		var d time.Duration
		for _, p := range pids {
			d += onCPU(b, uint32(p))
		}
		return d
	}
	for i := range ls { // warm up: the pools' connections and the plans
		add(ls[i], -1-i)
		claim(i)
	}
	const adds, claims = 100, 20
	var addWall, addCPU, claimWall, claimCPU [4]time.Duration
	rounds := 0
	b.ResetTimer()
	for done := 0; done < b.N; done += adds {
		for k := range ls {
			i := (k + rounds) % len(ls)
			l := ls[i]
			c0, start := serverCPU(l), time.Now()
			for j := done; j < done+adds; j++ {
				add(l, j)
			}
			addWall[i] += time.Since(start)
			c1, start := serverCPU(l), time.Now()
			addCPU[i] += c1 - c0
			for range claims {
				claim(i)
			}
			claimWall[i] += time.Since(start)
			claimCPU[i] += serverCPU(l) - c1
		}
		rounds++
	}
	b.StopTimer()
	per := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
	for i, n := range names {
		b.ReportMetric(per(addWall[i], rounds*adds), n+"-add-µs/tx")
		b.ReportMetric(per(addCPU[i], rounds*adds), n+"-add-server-cpu-µs/tx")
		b.ReportMetric(per(claimWall[i], rounds*claims), n+"-claim-µs")
		b.ReportMetric(per(claimCPU[i], rounds*claims), n+"-claim-server-cpu-µs")
		b.ReportMetric(float64(claimed[i])/float64(rounds*claims+1), n+"-rows/claim")
	}
}
