package postgres_test

import (
	"context"
	"fmt"
	"github.com/wary-go/wary/broker/driver"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestAddLocksCountersInOrder proves that the single statement of an add
// locks its aggregates' counters in aggregate order, which is what keeps
// concurrent adding transactions free of deadlocks: T1 holds b's counter;
// T2 adds to b and a, so it locks a and then waits for b; T3, adding to a,
// must then wait for T2. Had T2 started with b, it would wait holding
// nothing and T3 would go through.
func TestAddLocksCountersInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, _ := newListenStoreSchema(ctx, t)
	box, err := outbox.New[pgx.Tx](pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// On failure: end the adds still waiting, then the transactions.
	var wg sync.WaitGroup
	var txs []pgx.Tx
	defer func() {
		cancel()
		wg.Wait()
		for _, tx := range txs {
			_ = tx.Rollback(context.Background())
		}
	}()
	begin := func() (pgx.Tx, int32) {
		t.Helper()
		tx, err := idemtest.D(pg).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		var pid int32
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return tx, pid
	}
	type added struct {
		seqs []int64
		err  error
	}
	add := func(tx pgx.Tx, aggs ...string) chan added {
		ch := make(chan added, 1)
		wg.Go(func() {
			msgs := make([]*outbox.Message, len(aggs))
			for i, a := range aggs {
				msgs[i] = &outbox.Message{AggregateID: a, Type: "x", Payload: []byte("{}")}
			}
			seqs, err := box.Add(ctx, tx, msgs...)
			ch <- added{seqs, err}
		})
		return ch
	}
	waiting := func(pid int32) bool {
		var n int
		if err := pg.Pool().QueryRow(ctx, "SELECT cardinality(pg_blocking_pids($1))", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	done := func(ch chan added, want ...int64) {
		t.Helper()
		select {
		case r := <-ch:
			if r.err != nil || !slices.Equal(r.seqs, want) {
				t.Fatalf("Add: %v, %v; want %v", r.seqs, r.err, want)
			}
		case <-ctx.Done():
			t.Fatal("Add did not return")
		}
	}
	t1, _ := begin()
	done(add(t1, "b"), 1)
	t2, pid2 := begin()
	a2 := add(t2, "b", "a")
	waitFor(ctx, t, "T2 waiting for b's counter", func() bool { return waiting(pid2) })
	t3, pid3 := begin()
	a3 := add(t3, "a")
	for !waiting(pid3) {
		select {
		case r := <-a3:
			t.Fatalf("T3 added to a while T2 waited for b (%v, %v): T2 did not lock a first", r.seqs, r.err)
		case <-ctx.Done():
			t.Fatal("T3 neither waiting nor done")
		case <-time.After(time.Millisecond):
		}
	}
	for _, step := range []struct {
		tx   pgx.Tx
		next chan added
		want []int64
	}{{t1, a2, []int64{2, 1}}, {t2, a3, []int64{2}}} {
		if err := step.tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		done(step.next, step.want...)
	}
	if err := t3.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAddOneAndTwoStatements: stores that add with one statement and with
// the two of earlier versions share the counters (a rolling upgrade), and
// a large add (more rows and aggregates than one chunk of the
// two-statement path) gets each aggregate's sequences in message order.
func TestAddOneAndTwoStatements(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	one, schema := newListenStoreSchema(ctx, t)
	two, err := postgres.New(ctx, one.Pool(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	postgres.TwoStatementAdd(two)
	next := map[string]int64{}
	for round, st := range []*postgres.Store{one, two, one, two} {
		box, err := outbox.New[pgx.Tx](st, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + round*1500 // 1, 1501, 3001, 4501 rows
		msgs := make([]*outbox.Message, n)
		for i := range msgs {
			msgs[i] = &outbox.Message{AggregateID: fmt.Sprint("agg-", (i*7)%(1+round*300)), Type: "x",
				Headers: driver.Headers{{"h", fmt.Sprint(i)}}, Payload: []byte(fmt.Sprint(i))}
		}
		msgs[0].Payload = nil
		tx, err := idemtest.D(st).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := box.Add(ctx, tx, msgs...)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := idemtest.D(st).Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
		for i, m := range msgs {
			next[m.AggregateID]++
			if seqs[i] != next[m.AggregateID] {
				t.Fatalf("round %d, message %d of %s: sequence %d, want %d", round, i, m.AggregateID, seqs[i], next[m.AggregateID])
			}
		}
	}
	// What was written: every row's sequence, headers and payload, in
	// insertion order.
	rows, err := one.Pool().Query(ctx, "SELECT aggregate_id, sequence, headers, payload FROM "+schema+"."+
		postgres.DefaultPrefix+"outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([4]string, error) {
		var a, h string
		var s int64
		var p []byte
		err := r.Scan(&a, &s, &h, &p)
		return [4]string{a, fmt.Sprint(s), h, string(p)}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	i, k := 0, 0
	for round := range 4 {
		n := 1 + round*1500
		for j := range n {
			a := fmt.Sprint("agg-", (j*7)%(1+round*300))
			seen[a]++
			want := [4]string{a, fmt.Sprint(seen[a]), fmt.Sprintf(`{"h":"%d"}`, j), fmt.Sprint(j)}
			if j == 0 {
				want[3] = ""
			}
			if got[i] != want {
				t.Fatalf("row %d (round %d, message %d): %q, want %q", i, round, j, got[i], want)
			}
			i++
		}
		k += n
	}
	if len(got) != k {
		t.Fatalf("%d rows, want %d", len(got), k)
	}
}

// BenchmarkAddSerial: one producer committing transactions of one outbox
// row over 100 aggregates, interleaved in rounds of 200 transactions, on
// four stores: the add in one statement with the wake-up ("one", as
// shipped), in the two statements of earlier versions ("two"), and both
// without the wake-up ("one-nw", "two-nw"); no relay, no wake flag set.
// Per store: the wall time of BEGIN, the add and COMMIT, and the CPU time
// they cost the database server (its backend's on-CPU time, from
// /proc/<pid>/schedstat: the machine's load moves it much less than the
// wall time) and this process (getrusage).
func BenchmarkAddSerial(b *testing.B) {
	ctx := b.Context()
	names := []string{"one", "two", "one-nw", "two-nw"}
	stores := make([]*postgres.Store, len(names))
	for i := range stores {
		stores[i] = newListenStore(ctx, b)
	}
	postgres.TwoStatementAdd(stores[1])
	postgres.NoWake(stores[2])
	postgres.NoWakeTwoStatements(stores[3])
	outboxes := make([]*outbox.Outbox[pgx.Tx], len(stores))
	add := func(i, j int) {
		st := stores[i]
		tx, err := idemtest.D(st).Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := outboxes[i].Add(ctx, tx, &outbox.Message{AggregateID: fmt.Sprint("agg-", j%100), Type: "t", Payload: []byte("x")}); err != nil {
			b.Fatal(err)
		}
		if err := idemtest.D(st).Commit(ctx, tx); err != nil {
			b.Fatal(err)
		}
	}
	// Serial use keeps each pool at one connection: its backend.
	pids := make([]uint32, len(stores))
	for i, st := range stores {
		var err error
		if outboxes[i], err = outbox.New[pgx.Tx](st, nil); err != nil {
			b.Fatal(err)
		}
		add(i, 0)
		conns := st.Pool().AcquireAllIdle(ctx)
		if len(conns) != 1 {
			b.Fatalf("%d connections", len(conns))
		}
		pids[i] = conns[0].Conn().PgConn().PID()
		conns[0].Release()
	}
	var wall, server, client [4]time.Duration
	const round = 200
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		for i := range stores {
			s0, c0 := onCPU(b, pids[i]), selfCPU(b)
			start := time.Now()
			for j := done; j < min(done+round, b.N); j++ {
				add(i, j)
			}
			wall[i] += time.Since(start)
			server[i] += onCPU(b, pids[i]) - s0
			client[i] += selfCPU(b) - c0
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	for i, n := range names {
		b.ReportMetric(per(wall[i]), n+"-µs/tx")
		b.ReportMetric(per(server[i]), n+"-server-cpu-µs/tx")
		b.ReportMetric(per(client[i]), n+"-client-cpu-µs/tx")
	}
}

// onCPU is the on-CPU time of process pid (a backend of the local server).
func onCPU(b *testing.B, pid uint32) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		b.Skipf("the server's CPU time: %v", err)
	}
	var ns int64
	if _, err := fmt.Sscan(string(raw), &ns); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ns)
}

// selfCPU is this process's user and system CPU time.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
