package idemtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// testSourceContract runs SourceContract on the store's own source.
func testSourceContract[Tx any](t *testing.T, f Factory[Tx], _ OutboxBroker, _ OutboxCaps) {
	e := SetupOutbox(t, f)
	SourceContract(t, e, e.Store)
}

// SourceContract checks what every seam.Source[outbox.Row] must guarantee, on the
// source p's store hands out for e's outbox (p: e's store, or one on its
// tables with other source settings):
//   - each aggregate's rows come in sequence order, within a batch and
//     across batches, each published once once its batch is settled;
//   - no aggregate is in two live batches (taken and not settled);
//   - a live batch's Lost context is not done while its claim holds;
//   - a batch released unsettled (Settle with nil) comes again;
//   - Close returns once every batch was settled.
func SourceContract[Tx any](t *testing.T, e *OutboxEnv[Tx], p idem.Store[Tx]) {
	t.Helper()
	const aggregates, perAggregate = 3, 4
	for seq := 1; seq <= perAggregate; seq++ {
		for a := range aggregates {
			e.Add(OM(fmt.Sprintf("c%d-%d", a, seq), fmt.Sprintf("c%d", a), int64(seq), "x"))
		}
	}
	ctx, cancel := context.WithTimeout(e.Ctx, time.Minute)
	defer cancel()
	never := func() <-chan struct{} { return nil }
	src, err := D(p).OutboxSource(ctx, seam.SourceConfig{Owner: "contract", BatchSize: 5, PollInterval: 5 * time.Millisecond,
		Now: time.Now, Logger: slog.New(slog.DiscardHandler), Note: func(string, error) {}, Woken: never, Changed: never})
	if err != nil {
		t.Fatal(err)
	}
	next := func(d time.Duration) *seam.Batch[outbox.Row] {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		b, err := src.Next(nctx, true)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next: %v", err)
		}
		return b
	}
	inOrder := func(b *seam.Batch[outbox.Row]) {
		t.Helper()
		last := map[string]int64{}
		for _, r := range b.Rows {
			if l, ok := last[r.AggregateID]; ok && r.Sequence != l+1 {
				t.Fatalf("batch %s: %s's rows out of sequence (%d after %d)", batchRows(b), r.AggregateID, r.Sequence, l)
			}
			last[r.AggregateID] = r.Sequence
		}
	}
	// A batch released unsettled comes again.
	first := next(30 * time.Second)
	if first == nil {
		t.Fatal("no batch within 30s")
	}
	inOrder(first)
	if err := src.Settle(ctx, first, nil); err != nil {
		t.Fatalf("release: %v", err)
	}
	settled := map[string]int64{} // each aggregate's last sequence published
	var live []*seam.Batch[outbox.Row]
	settle := func(b *seam.Batch[outbox.Row]) {
		t.Helper()
		if b.Lost != nil && b.Lost.Err() != nil {
			t.Fatalf("batch %s lost while held", batchRows(b))
		}
		var sent []int64
		for _, r := range b.Rows {
			if r.Sequence != settled[r.AggregateID]+1 {
				t.Fatalf("batch %s: %s:%d follows %s:%d", batchRows(b), r.AggregateID, r.Sequence, r.AggregateID, settled[r.AggregateID])
			}
			settled[r.AggregateID] = r.Sequence
			sent = append(sent, r.RowID)
		}
		if err := src.Settle(ctx, b, &seam.Outcome{Sent: sent, At: time.Now()}); err != nil {
			t.Fatalf("settle %s: %v", batchRows(b), err)
		}
	}
	done := func() bool {
		for a := range aggregates {
			if settled[fmt.Sprintf("c%d", a)] != perAggregate {
				return false
			}
		}
		return true
	}
	for !done() {
		if ctx.Err() != nil {
			t.Fatalf("not every row published within a minute: %v", settled)
		}
		// Hold up to two batches at once: the source hands out the second
		// only if it shares no aggregate with the first.
		if b := next(50 * time.Millisecond); b != nil {
			inOrder(b)
			for _, l := range live {
				for _, r := range b.Rows {
					for _, lr := range l.Rows {
						if r.AggregateID == lr.AggregateID {
							t.Fatalf("aggregate %s in two live batches: %s and %s", r.AggregateID, batchRows(l), batchRows(b))
						}
					}
				}
			}
			live = append(live, b)
			if len(live) < 2 {
				continue
			}
		}
		if len(live) > 0 {
			settle(live[0])
			live = live[1:]
		}
	}
	for _, b := range live {
		settle(b)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := len(e.Rows(outbox.Filter{States: []outbox.State{outbox.Pending}})); n != 0 {
		t.Errorf("%d rows pending after every row was published", n)
	}
}

// batchRows lists a batch's rows.
func batchRows(b *seam.Batch[outbox.Row]) string {
	s := ""
	for _, r := range b.Rows {
		s += fmt.Sprintf("%s:%d ", r.AggregateID, r.Sequence)
	}
	return s
}
