package idemtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/wary-go/wary/broker"
)

// Bench measures messages per second through the inbox against the bare
// transaction: each message is received from a Queue, its effect (one row
// inserted) is written in a transaction, and it is acknowledged. "bare"
// does exactly that without the inbox (Store.Begin, the insert, Commit: the
// floor); "inbox" adds the claim (Handle); "batch100" applies 100 messages
// per transaction with HandleBatch, each with its own insert; the
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
	b.Run("bare-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 1, false) })
	b.Run("inbox-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 1, true) })
	b.Run("batch100-parallel8", func(b *testing.B) { bench(b, f, statements, 8, 100, true) })
}

func bench[Tx any](b *testing.B, f Factory[Tx], statements func() int64, workers, batch int, inbox bool) {
	e := Setup(b, f, "")
	in := e.Inbox("bench", nil)
	q := NewQueue(Caps)
	for i := range b.N {
		q.Push(&broker.Message{ID: fmt.Sprintf("m%09d", i), Body: []byte("x")})
	}
	effect := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return e.DB.Exec(ctx, tx, `INSERT INTO effects (message_id, note) VALUES ($1, $2)`, d.Message.ID, string(d.Message.Body))
	}
	bare := func(ctx context.Context, ds []*broker.Delivery) error {
		tx, err := e.Store.Begin(ctx)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if err := effect(ctx, tx, d); err != nil {
				_ = e.Store.Rollback(ctx, tx)
				return err
			}
		}
		if err := e.Store.Commit(ctx, tx); err != nil {
			return err
		}
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil {
				return err
			}
		}
		return nil
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
			sub := q.Subscription()
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
				case batch == 1:
					err = in.Handle(ctx, ds[0], effect)
				default:
					err = in.HandleBatch(ctx, ds, effect)
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
