package idemtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/idem"
)

// BenchRelay measures rows per second published through the relay to b's
// topic: b.N rows over 100 aggregates are committed to the outbox first
// (not timed), then relays (Run) publish them until the backlog is empty. "relay" is one relay with the
// default options; "relay-batch500" claims 500 rows at a time; "3relays"
// runs three at once (on a store with a relay lease, they take turns).
func BenchRelay[Tx any](b *testing.B, f Factory[Tx], br func(t testing.TB) OutboxBroker) {
	b.Run("relay", func(b *testing.B) { benchRelay(b, f, br(b), 1, 0) })
	b.Run("relay-batch500", func(b *testing.B) { benchRelay(b, f, br(b), 1, 500) })
	b.Run("3relays", func(b *testing.B) { benchRelay(b, f, br(b), 3, 0) })
}

func benchRelay[Tx any](b *testing.B, f Factory[Tx], br OutboxBroker, relays, batch int) {
	e := SetupOutbox(b, f)
	for start := 0; start < b.N; start += 500 {
		var msgs []*idem.OutboxMessage
		for i := start; i < min(start+500, b.N); i++ {
			msgs = append(msgs, OM(fmt.Sprintf("m%09d", i), fmt.Sprintf("agg-%03d", i%100), 0, "payload"))
		}
		e.Add(msgs...)
	}
	rs := make([]*idem.Relay, relays)
	for i := range rs {
		rs[i] = e.Relay(br.Topic, &idem.RelayOptions{Owner: fmt.Sprintf("bench-%d", i), BatchSize: batch})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	for {
		h, err := rs[0].Health(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if h.Backlog == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	if n := e.Int(`SELECT count(*) FROM wary_outbox WHERE state = 1`); n != int64(b.N) {
		b.Errorf("%d rows sent, want %d", n, b.N)
	}
}
