package idemtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// Bench measures messages per second through the inbox against the bare
// transaction: each message is received from a Queue, its effect (one row
// inserted) is written in a transaction, and it is acknowledged. "bare"
// does exactly that without the inbox (Store.Begin, the insert, Commit: the
// floor); "inbox" adds the claim (Handle); "batch100" applies 100 messages
// per transaction with HandleBatch, each with its own insert;
// "batchall100" applies 100 messages per transaction with HandleBatchAll,
// with one multi-row insert (EffectAll without the counter); the
// "parallel8" variants run eight consumers at once. Every variant reports
// msgs/s; compare the variants of one run, not figures across runs.
func Bench[Tx any](b *testing.B, f Factory[Tx]) { BenchCounted(b, f, nil) }

// BenchCounted is Bench for a store whose database counts the statements
// it is sent (each a round trip): statements returns the count so far, and
// each variant also reports statements per message ("stmts/msg").
func BenchCounted[Tx any](b *testing.B, f Factory[Tx], statements func() int64) {
	b.Run("bare", func(b *testing.B) { bench(b, f, statements, 1, 1, false) })
	b.Run("inbox", func(b *testing.B) { bench(b, f, statements, 1, 1, true) })
	b.Run("batch100", func(b *testing.B) { bench(b, f, statements, 1, 100, true) })
	b.Run("batchall100", func(b *testing.B) { bench(b, f, statements, 1, -100, true) })
	b.Run("bare-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 1, false) })
	b.Run("inbox-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 1, true) })
	b.Run("batch100-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 100, true) })
	b.Run("batchall100-parallel8", func(b *testing.B) { bench(b, f, statements, 8, -100, true) })
	b.Run("interleaved", func(b *testing.B) { benchInterleaved(b, f) })
}

// benchInterleaved measures bare, inbox, batch100 and batchall100 (one
// consumer each) in turns of 100 messages, b.N messages for each, so that
// they share whatever else the machine is doing, and reports their msgs/s
// and ratios: inbox/bare-%, batch100/inbox-x and batchall100/inbox-x.
func benchInterleaved[Tx any](b *testing.B, f Factory[Tx]) {
	const turn, modes = 100, 4
	e := Setup(b, f, "")
	in := e.Inbox("bench", nil)
	q := NewQueue(Caps)
	for i := range modes * b.N {
		q.Push(&broker.Message{ID: fmt.Sprintf("m%09d", i), Body: []byte("x")})
	}
	effect := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return e.DB.Exec(ctx, tx, `INSERT INTO effects (message_id, note) VALUES ($1, $2)`, d.Message.ID, string(d.Message.Body))
	}
	ctx := b.Context()
	sub := q.Subscription(nil)
	all := func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		return e.DB.Exec(ctx, tx, InsertEffects(len(ds)), EffectArgs(ds)...)
	}
	var spent [modes]time.Duration // bare, inbox, batch100, batchall100
	b.ResetTimer()
	for done := 0; done < b.N; done += turn {
		n := min(turn, b.N-done)
		for mode := range modes {
			start := time.Now()
			size := 1
			if mode >= 2 {
				size = n
			}
			for left := n; left > 0; left -= size {
				ds, err := sub.Receive(ctx, size)
				if err == nil {
					switch mode {
					case 0:
						err = bareTx(ctx, e, ds, effect)
					case 1:
						_, err = in.Handle(ctx, ds[0], effect)
					case 2:
						_, err = in.HandleBatch(ctx, ds, effect)
					default:
						_, err = in.HandleBatchAll(ctx, ds, all)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			spent[mode] += time.Since(start)
		}
	}
	b.StopTimer()
	rate := func(mode int) float64 { return float64(b.N) / spent[mode].Seconds() }
	b.ReportMetric(rate(0), "bare-msgs/s")
	b.ReportMetric(rate(1), "inbox-msgs/s")
	b.ReportMetric(rate(2), "batch100-msgs/s")
	b.ReportMetric(100*rate(1)/rate(0), "inbox/bare-%")
	b.ReportMetric(rate(3), "batchall100-msgs/s")
	b.ReportMetric(rate(2)/rate(1), "batch100/inbox-x")
	b.ReportMetric(rate(3)/rate(1), "batchall100/inbox-x")
	b.ReportMetric(0, "ns/op")
	if n := e.Int(`SELECT count(*) FROM effects`); n != int64(modes*b.N) {
		b.Errorf("%d effects for %d messages", n, modes*b.N)
	}
}

// bareTx applies ds's effects in one transaction without the inbox, then
// acknowledges them.
func bareTx[Tx any](ctx context.Context, e *Env[Tx], ds []*broker.Delivery, effect idem.Handler[Tx]) error {
	tx, err := e.Driver.Begin(ctx)
	if err != nil {
		return err
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

// bench runs workers consumers taking batch messages at a time (a negative
// batch: -batch at a time through HandleBatchAll).
func bench[Tx any](b *testing.B, f Factory[Tx], statements func() int64, workers, batch int, inbox bool) {
	batchAll := batch < 0
	batch = max(batch, -batch)
	e := Setup(b, f, "")
	in := e.Inbox("bench", nil)
	q := NewQueue(Caps)
	for i := range b.N {
		q.Push(&broker.Message{ID: fmt.Sprintf("m%09d", i), Body: []byte("x")})
	}
	effect := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return e.DB.Exec(ctx, tx, `INSERT INTO effects (message_id, note) VALUES ($1, $2)`, d.Message.ID, string(d.Message.Body))
	}
	bare := func(ctx context.Context, ds []*broker.Delivery) error { return bareTx(ctx, e, ds, effect) }
	all := func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		return e.DB.Exec(ctx, tx, InsertEffects(len(ds)), EffectArgs(ds)...)
	}
	ctx := b.Context()
	var before int64
	if statements != nil {
		before = statements()
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			sub := q.Subscription(nil)
			for {
				ds, err := sub.Receive(ctx, batch)
				if errors.Is(err, ErrEmpty) {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				switch {
				case !inbox:
					err = bare(ctx, ds)
				case batchAll:
					_, err = in.HandleBatchAll(ctx, ds, all)
				case batch == 1:
					_, err = in.Handle(ctx, ds[0], effect)
				default:
					_, err = in.HandleBatch(ctx, ds, effect)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if statements != nil {
		b.ReportMetric(float64(statements()-before)/float64(b.N), "stmts/msg")
	}
	if n := e.Int(`SELECT count(*) FROM effects`); n != int64(b.N) {
		b.Errorf("%d effects for %d messages", n, b.N)
	}
}
