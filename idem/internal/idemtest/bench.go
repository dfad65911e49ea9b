package idemtest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/internal/benchpair"
)

// Bench measures messages per second through the inbox against the bare
// transaction: each message is received from a Queue, its effect (one row
// inserted) is written in a transaction, and it is acknowledged. "bare"
// does exactly that without the inbox (Store.Begin, or the DB's BeginBare
// where it has one, the insert, Commit: the floor); "inbox" adds the claim (Handle); "bare100" is bare with 100
// messages per transaction; "batch100" is the inbox with Options.Batch 100
// and 100 concurrent callers of Handle (a Run with Concurrency 100), so
// that up to 100 messages share a transaction, each with its own insert;
// the "parallel8" variants run eight consumers at once. Every variant
// reports msgs/s; compare the variants of one run, not figures across
// runs.
func Bench[Tx any](b *testing.B, f Factory[Tx]) { BenchCounted(b, f, nil) }

// BenchCounted is Bench for a store whose database counts the statements
// it is sent (each a round trip): statements returns the count so far, and
// each variant also reports statements per message ("stmts/msg").
func BenchCounted[Tx any](b *testing.B, f Factory[Tx], statements func() int64) {
	BenchMetered(b, f, Meters{Statements: statements})
}

// Meters are what a store's benchmark measures beyond time (each may be
// nil). The interleaved benchmark reports them per mode.
type Meters struct {
	// Statements returns the statements (round trips) sent so far:
	// "stmts/msg".
	Statements func() int64
	// ServerCPU returns the CPU the database server has used so far,
	// whoever its clients: "servercpu-µs/msg".
	ServerCPU func() time.Duration
	// Trace, with true, starts recording the statements sent; with
	// false, stops and returns them. The interleaved benchmark logs
	// those of each mode's first turn, counted by text.
	Trace func(on bool) []string
	// OneMore adds the interleaved mode "bare+1": bare with one more
	// trivial statement (SELECT 1) in its transaction, a round trip that
	// does no work, the ceiling of an inbox that adds one round trip to
	// the bare transaction (inbox/bare+1-%).
	OneMore bool
	// ClaimFirst adds the interleaved mode "ceiling1": a transaction the
	// store begins (Driver.Begin) whose first statement is a plain INSERT
	// of the message's ID into the hand-written inbox table (the
	// article's, its primary key only), then the effect: the least an
	// inbox that writes a row per message can send and have the server
	// do, for a store whose Begin sends nothing (its first statement
	// begins the transaction), reported as inbox/ceiling1-% and
	// ceiling1/bare-%.
	ClaimFirst bool
}

// BenchMetered is Bench with meters.
func BenchMetered[Tx any](b *testing.B, f Factory[Tx], m Meters) {
	statements := m.Statements
	b.Run("bare", func(b *testing.B) { bench(b, f, statements, 1, 1, false) })
	b.Run("inbox", func(b *testing.B) { bench(b, f, statements, 1, 1, true) })
	b.Run("bare100", func(b *testing.B) { bench(b, f, statements, 1, 100, false) })
	b.Run("batch100", func(b *testing.B) { bench(b, f, statements, 1, 100, true) })
	b.Run("bare-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 1, false) })
	b.Run("inbox-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 1, true) })
	b.Run("batch100-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 100, true) })
	b.Run("interleaved", func(b *testing.B) { benchInterleaved(b, f, m) })
}

// ClaimAllDB is a DB that can claim many message IDs in a hand-written
// inbox table with one statement over the IDs bound as one parameter
// (PostgreSQL: INSERT ... SELECT ... FROM unnest($2::text[]) ON CONFLICT
// DO NOTHING RETURNING; SQLite the same over json_each): the interleaved
// benchmark's ceiling100. ClaimAll inserts (consumer, id, at) into table
// (with the article's columns and primary key) for each of ids, skipping
// those already there, and returns how many it inserted.
type ClaimAllDB[Tx any] interface {
	ClaimAll(ctx context.Context, tx Tx, table, consumer string, ids []string, at time.Time) (int, error)
}

// benchInterleaved measures bare, inbox, bare100, batch100, article,
// article100 and ceiling100 (one consumer each) in turns of 100
// messages, b.N messages for each, so that they share whatever else the
// machine is doing, and reports their msgs/s and ratios: inbox/bare-%,
// inbox/article-%, batch100/inbox-x, batch100/bare100-%,
// batch100/article100-%, batch100/ceiling100-% and ceiling100/bare100-%,
// and batch100's messages per commit. "article" is the inbox a team
// writes by hand: in the bare transaction, before the effect, INSERT INTO
// its own inbox table ... ON CONFLICT (consumer, message_id) DO NOTHING
// RETURNING 1. "article100" is bare100 with the article's claim before
// each effect: 100 messages per transaction, one goroutine. "ceiling100"
// is the most any inbox that writes a row per message can do with 100
// messages per transaction: bare100 with one statement claiming the
// transaction's 100 IDs first (ClaimAllDB; not run on a DB without it),
// by one goroutine, no hand-offs. With statements, each mode also
// reports its statements per message (bare-stmts/msg, ...). Each mode
// also reports the process's CPU per message during its turns
// (bare-cpu-µs/msg, ...): the modes run one at a time, so that is the
// client's CPU for the mode, less sensitive to the machine's load than
// the rates, and the goroutines started per message (bare-goroutines/msg,
// ...): batch100's one per Handle call, and any a driver starts per
// statement. With Meters.OneMore it runs "bare+1" too, with
// Meters.ClaimFirst "ceiling1" (see Meters), with
// Meters.ServerCPU it reports each mode's server CPU per message, and
// with Meters.Trace it logs the statements of each mode's first turn.
func benchInterleaved[Tx any](b *testing.B, f Factory[Tx], m Meters) {
	const turn, modes = 100, 9
	names := [modes]string{"bare", "inbox", "bare100", "batch100", "article", "article100", "ceiling100", "bare+1", "ceiling1"}
	statements := m.Statements
	e := Setup(b, f, "")
	in := e.Inbox("bench", nil)
	grouped := e.Inbox("bench-grouped", &idem.Options{Batch: turn})
	q := NewQueue(Caps)
	for i := range modes * b.N {
		q.Push(&broker.Message{ID: fmt.Sprintf("m%09d", i), Body: []byte("x")})
	}
	effect := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return e.DB.Exec(ctx, tx, `INSERT INTO effects (message_id, note) VALUES ($1, $2)`, d.Message.ID, string(d.Message.Body))
	}
	e.Exec(`CREATE TABLE article_inbox (consumer TEXT NOT NULL, message_id TEXT NOT NULL, processed_at TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (consumer, message_id))`)
	article := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		var one int
		if err := e.DB.QueryRow(ctx, tx, `INSERT INTO article_inbox (consumer, message_id, processed_at) VALUES ($1, $2, $3)
			ON CONFLICT (consumer, message_id) DO NOTHING RETURNING 1`, "bench-article", d.Message.ID, time.Now()).Scan(&one); err != nil {
			return fmt.Errorf("article inbox: %w", err) // no row: a duplicate, which this benchmark never sends
		}
		return effect(ctx, tx, d)
	}
	oneMore := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		var one int
		if err := e.DB.QueryRow(ctx, tx, `SELECT 1`).Scan(&one); err != nil {
			return err
		}
		return effect(ctx, tx, d)
	}
	claimFirst := func(ctx context.Context, d *broker.Delivery) error {
		tx, err := e.Driver.Begin(ctx)
		if err != nil {
			return err
		}
		if err := e.DB.Exec(ctx, tx, `INSERT INTO article_inbox (consumer, message_id, processed_at) VALUES ($1, $2, $3)`,
			"bench-ceiling1", d.Message.ID, time.Now()); err != nil {
			_ = e.Driver.Rollback(ctx, tx)
			return fmt.Errorf("ceiling1's claim: %w", err)
		}
		if err := effect(ctx, tx, d); err != nil {
			_ = e.Driver.Rollback(ctx, tx)
			return err
		}
		return e.Driver.Commit(ctx, tx)
	}
	claimAll, ceiling := e.DB.(ClaimAllDB[Tx])
	skip := func(mode int) bool {
		return mode == 6 && !ceiling || mode == 7 && !m.OneMore || mode == 8 && !m.ClaimFirst
	}
	ctx := b.Context()
	sub := q.Subscription(nil)
	var spent [modes]time.Duration  // by mode, in the order of names
	var sent [modes]int64           // statements, where counted
	var cpu [modes]time.Duration    // the process's CPU
	var server [modes]time.Duration // the server's, where measured
	var started [modes]uint64       // goroutines
	b.ResetTimer()
	for done := 0; done < b.N; done += turn {
		n := min(turn, b.N-done)
		for mode := range modes {
			if skip(mode) {
				continue
			}
			var before int64
			if statements != nil {
				before = statements()
			}
			var server0 time.Duration
			if m.ServerCPU != nil {
				server0 = m.ServerCPU()
			}
			if m.Trace != nil && done == 0 {
				m.Trace(true)
			}
			start, cpu0, g0 := time.Now(), benchpair.CPUTime(), goroutinesCreated()
			var err error
			switch mode {
			case 0, 1, 4, 7, 8:
				for range n {
					ds, rerr := sub.Receive(ctx, 1)
					if err = rerr; err != nil {
						break
					}
					switch mode {
					case 0:
						err = bareTx(ctx, e, ds, effect)
					case 1:
						_, err = in.Handle(ctx, ds[0], effect)
					case 7:
						err = bareTx(ctx, e, ds, oneMore)
					case 8:
						err = claimFirst(ctx, ds[0])
					default:
						err = bareTx(ctx, e, ds, article)
					}
					if err != nil {
						break
					}
				}
			case 2:
				var ds []*broker.Delivery
				if ds, err = sub.Receive(ctx, n); err == nil {
					err = bareTx(ctx, e, ds, effect)
				}
			case 3:
				err = handleConcurrently(ctx, grouped, sub, n, effect)
			case 5:
				var ds []*broker.Delivery
				if ds, err = sub.Receive(ctx, n); err == nil {
					err = bareTx(ctx, e, ds, article)
				}
			case 6:
				var ds []*broker.Delivery
				if ds, err = sub.Receive(ctx, n); err == nil {
					err = claimAllTx(ctx, e, claimAll, ds, effect)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			spent[mode] += time.Since(start)
			cpu[mode] += benchpair.CPUTime() - cpu0
			started[mode] += goroutinesCreated() - g0
			if statements != nil {
				sent[mode] += statements() - before
			}
			if m.ServerCPU != nil {
				server[mode] += m.ServerCPU() - server0
			}
			if m.Trace != nil && done == 0 {
				logTrace(b, names[mode], n, m.Trace(false))
			}
		}
	}
	b.StopTimer()
	rate := func(mode int) float64 { return float64(b.N) / spent[mode].Seconds() }
	b.ReportMetric(rate(0), "bare-msgs/s")
	b.ReportMetric(rate(1), "inbox-msgs/s")
	b.ReportMetric(rate(2), "bare100-msgs/s")
	b.ReportMetric(rate(3), "batch100-msgs/s")
	b.ReportMetric(rate(4), "article-msgs/s")
	b.ReportMetric(100*rate(1)/rate(0), "inbox/bare-%")
	b.ReportMetric(100*rate(1)/rate(4), "inbox/article-%")
	b.ReportMetric(100*rate(4)/rate(0), "article/bare-%")
	b.ReportMetric(rate(3)/rate(1), "batch100/inbox-x")
	b.ReportMetric(100*rate(3)/rate(2), "batch100/bare100-%")
	b.ReportMetric(float64(b.N)/float64(grouped.Stats().Commits), "batch100-msgs/commit")
	b.ReportMetric(rate(5), "article100-msgs/s")
	b.ReportMetric(100*rate(3)/rate(5), "batch100/article100-%")
	ran := 0
	if ceiling {
		b.ReportMetric(rate(6), "ceiling100-msgs/s")
		b.ReportMetric(100*rate(3)/rate(6), "batch100/ceiling100-%")
		b.ReportMetric(100*rate(6)/rate(2), "ceiling100/bare100-%")
	}
	if m.OneMore {
		b.ReportMetric(rate(7), "bare+1-msgs/s")
		b.ReportMetric(100*rate(1)/rate(7), "inbox/bare+1-%")
		b.ReportMetric(100*rate(7)/rate(0), "bare+1/bare-%")
	}
	if m.ClaimFirst {
		b.ReportMetric(rate(8), "ceiling1-msgs/s")
		b.ReportMetric(100*rate(1)/rate(8), "inbox/ceiling1-%")
		b.ReportMetric(100*rate(8)/rate(0), "ceiling1/bare-%")
	}
	for mode, name := range names {
		if skip(mode) {
			continue
		}
		ran++
		if m.ServerCPU != nil {
			b.ReportMetric(float64(server[mode].Nanoseconds())/1e3/float64(b.N), name+"-servercpu-µs/msg")
		}
		b.ReportMetric(float64(cpu[mode].Nanoseconds())/1e3/float64(b.N), name+"-cpu-µs/msg")
		b.ReportMetric(float64(started[mode])/float64(b.N), name+"-goroutines/msg")
		if statements != nil {
			b.ReportMetric(float64(sent[mode])/float64(b.N), name+"-stmts/msg")
		}
	}
	b.ReportMetric(0, "ns/op")
	if n := e.Int(`SELECT count(*) FROM effects`); n != int64(ran*b.N) {
		b.Errorf("%d effects for %d messages", n, ran*b.N)
	}
}

// literal is a quoted string or a number in a statement's text.
var literal = regexp.MustCompile(`'(?:[^'\\]|\\.)*'|\b[0-9]+\b`)

// logTrace logs the statements a mode sent for n messages, counted by
// their text (its first 100 bytes, literals as ?).
func logTrace(b *testing.B, mode string, n int, stmts []string) {
	counts := map[string]int{}
	var order []string
	for _, s := range stmts {
		s = literal.ReplaceAllString(strings.Join(strings.Fields(s), " "), "?")
		if len(s) > 100 {
			s = s[:100] + "…"
		}
		if counts[s] == 0 {
			order = append(order, s)
		}
		counts[s]++
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s: %d statements for %d messages", mode, len(stmts), n)
	for _, s := range order {
		fmt.Fprintf(&out, "\n  %6.2f/msg  %s", float64(counts[s])/float64(n), s)
	}
	b.Log(out.String())
}

// goroutinesCreated is how many goroutines the process has started, 0
// where the runtime does not say.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// handleConcurrently receives n messages and handles each in a goroutine
// of its own through in, as a Run with Concurrency n would.
func handleConcurrently[Tx any](ctx context.Context, in *idem.Inbox[Tx], sub *broker.Subscription, n int, h idem.Handler[Tx]) error {
	ds, err := sub.Receive(ctx, n)
	if err != nil {
		return err
	}
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { _, errs[i] = in.Handle(ctx, d, h) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bareTx applies ds's effects in one transaction without the inbox, then
// acknowledges them.
func bareTx[Tx any](ctx context.Context, e *Env[Tx], ds []*broker.Delivery, effect idem.Handler[Tx]) error {
	return claimedTx(ctx, e, ds, nil, effect)
}

// BareDB is a DB whose benchmarks' transactions without the inbox (bare,
// bare+1, bare100, article, article100, ceiling100) begin as a program
// on the database's client writes its own (BeginBare), rather than
// through the store (Driver.Begin): for a store whose transactions begin
// on connections of its own. The store's Commit and Rollback end them.
type BareDB[Tx any] interface {
	BeginBare(ctx context.Context) (Tx, error)
}

// claimedTx is bareTx with claim, where not nil, run in the transaction
// before the effects.
func claimedTx[Tx any](ctx context.Context, e *Env[Tx], ds []*broker.Delivery, claim func(context.Context, Tx) error, effect idem.Handler[Tx]) error {
	begin := e.Driver.Begin
	if b, ok := e.DB.(BareDB[Tx]); ok {
		begin = b.BeginBare
	}
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	if claim != nil {
		if err := claim(ctx, tx); err != nil {
			_ = e.Driver.Rollback(ctx, tx)
			return err
		}
	}
	for _, d := range ds {
		if err := effect(ctx, tx, d); err != nil {
			_ = e.Driver.Rollback(ctx, tx)
			return err
		}
	}
	if err := e.Driver.Commit(ctx, tx); err != nil {
		return err
	}
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			return err
		}
	}
	return nil
}

// claimAllTx is bareTx with ds's IDs claimed first in article_inbox by
// one statement (ClaimAllDB), as consumer "bench-ceiling".
func claimAllTx[Tx any](ctx context.Context, e *Env[Tx], db ClaimAllDB[Tx], ds []*broker.Delivery, effect idem.Handler[Tx]) error {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.Message.ID
	}
	return claimedTx(ctx, e, ds, func(ctx context.Context, tx Tx) error {
		n, err := db.ClaimAll(ctx, tx, "article_inbox", "bench-ceiling", ids, time.Now())
		if err != nil {
			return fmt.Errorf("claim all: %w", err)
		}
		if n != len(ids) {
			return fmt.Errorf("claim all: %d of %d IDs new, in a benchmark that sends no duplicate", n, len(ids))
		}
		return nil
	}, effect)
}

// bench runs workers consumers. A bare consumer takes batch messages per
// transaction; an inbox consumer with batch above 1 is batch goroutines
// calling Handle one message at a time on an inbox with Options.Batch
// batch, as a Run with Concurrency batch would.
func bench[Tx any](b *testing.B, f Factory[Tx], statements func() int64, workers, batch int, inbox bool) {
	e := Setup(b, f, "")
	in := e.Inbox("bench", &idem.Options{Batch: batch})
	q := NewQueue(Caps)
	for i := range b.N {
		q.Push(&broker.Message{ID: fmt.Sprintf("m%09d", i), Body: []byte("x")})
	}
	effect := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return e.DB.Exec(ctx, tx, `INSERT INTO effects (message_id, note) VALUES ($1, $2)`, d.Message.ID, string(d.Message.Body))
	}
	ctx := b.Context()
	var before int64
	if statements != nil {
		before = statements()
	}
	callers, take := 1, batch
	if inbox {
		callers, take = batch, 1
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	var inboxes []*idem.Inbox[Tx]
	for range workers {
		// One inbox per consumer: its transactions are its own.
		in := in
		if inbox && workers > 1 {
			in = e.Inbox("bench", &idem.Options{Batch: batch})
		}
		inboxes = append(inboxes, in)
		for range callers {
			wg.Go(func() {
				sub := q.Subscription(nil)
				for {
					ds, err := sub.Receive(ctx, take)
					if errors.Is(err, ErrEmpty) {
						return
					}
					if err != nil {
						b.Error(err)
						return
					}
					if inbox {
						_, err = in.Handle(ctx, ds[0], effect)
					} else {
						err = bareTx(ctx, e, ds, effect)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if statements != nil {
		b.ReportMetric(float64(statements()-before)/float64(b.N), "stmts/msg")
	}
	if inbox {
		var commits int64
		for _, in := range inboxes {
			commits += in.Stats().Commits
		}
		b.ReportMetric(float64(b.N)/float64(commits), "msgs/commit")
	}
	if n := e.Int(`SELECT count(*) FROM effects`); n != int64(b.N) {
		b.Errorf("%d effects for %d messages", n, b.N)
	}
}
