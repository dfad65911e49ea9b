package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/store"
)

// BenchmarkClaimSlices: the polling relay's claim (up to 100 rows, 10 per
// aggregate; released, so every claim finds the same backlog) on an
// outbox of 5,000 pending rows over 500 aggregates, the claim's head
// look-ups reading every slice (partition: slice 0, the slices with rows,
// the one ahead):
//   - "1": all in one slice;
//   - "8-sent": in the current slice, after 7 past slices of 5,000 sent
//     rows each (KeepSent of 7 days with OutboxSlice of a day keeps about
//     that many), as with a relay that keeps up;
//   - "8-backlog": spread over 8 slices, each aggregate with rows in every
//     one (a relay 7 slices behind).
func BenchmarkClaimSlices(b *testing.B) {
	for _, c := range []struct {
		name        string
		slices      int
		sentBacklog bool
	}{{"1", 1, false}, {"8-sent", 8, true}, {"8-backlog", 8, false}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := b.Context()
			pool := newPool(b)
			st, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			per := 5000 / c.slices
			if c.sentBacklog {
				per = 5000
			}
			aggs := make([]string, per)
			for i := range aggs {
				aggs[i] = fmt.Sprintf("a%03d", i%500)
			}
			for k := range c.slices {
				at := t0.Add(time.Duration(k) * time.Minute)
				addAt(b, st, at, aggs)
				if c.sentBacklog && k < c.slices-1 {
					if _, err := pool.Exec(ctx, "UPDATE wary_outbox SET state = 1, sent_at = $1 WHERE state = 0", at); err != nil {
						b.Fatal(err)
					}
				}
				if k < c.slices-1 {
					rotate(b, st, t0.Add(time.Duration(k+1)*time.Minute), t0.Add(-time.Hour))
				}
			}
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE wary_outbox"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				batch, err := st.Driver().ClaimOutbox(ctx, store.OutboxClaim{Owner: "b", Now: t0.Add(time.Hour), Limit: 100, PerAggregate: 10})
				if err != nil {
					b.Fatal(err)
				}
				if len(batch.Rows()) != 100 {
					b.Fatalf("claimed %d rows, want 100", len(batch.Rows()))
				}
				if err := batch.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
