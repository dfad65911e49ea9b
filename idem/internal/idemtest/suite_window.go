package idemtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/outbox"
)

// testWindowFailure: one message in the middle of a published batch
// fails while the messages after it reach the broker (a window of
// confirms). The failed row's later rows of the same aggregate are not
// marked sent and go again after it; the other aggregates' rows are marked
// sent. A consumer first sees a later row before its predecessor (a
// version check sees a gap), then the predecessor and the later rows again.
func testWindowFailure[Tx any](t *testing.T, f Factory[Tx], b OutboxBroker, _ OutboxCaps) {
	e := SetupOutbox(t, f)
	sub := b.Subscribe(t)
	e.Add(OM("a-1", "a", 1, "x"), OM("a-2", "a", 2, "x"), OM("a-3", "a", 3, "x"), OM("a-4", "a", 4, "x"), OM("a-5", "a", 5, "x"),
		OM("b-1", "b", 1, "x"), OM("b-2", "b", 2, "x"))
	var failing atomic.Bool
	failing.Store(true)
	topic := WindowTopic(b.Topic, func(m *broker.Message) bool { return failing.Load() && m.ID == "a-3" })
	clock := &fakeNow{t: time.Now()}
	r := e.Relay(topic, &outbox.RelayOptions{Telemetry: broker.Telemetry{Now: clock.Now}, Backoff: broker.Backoff{Initial: time.Hour, Max: time.Hour}})
	if n, err := r.Drain(e.Ctx); n != 4 || err != nil {
		t.Fatalf("Drain: %d, %v; want 4 (a-1, a-2, b-1, b-2)", n, err)
	}
	state := map[string]outbox.Row{}
	for _, row := range e.Rows(outbox.Filter{}) {
		state[row.ID] = row
	}
	for id, want := range map[string]outbox.State{"a-1": outbox.Sent, "a-2": outbox.Sent, "a-3": outbox.Pending,
		"a-4": outbox.Pending, "a-5": outbox.Pending, "b-1": outbox.Sent, "b-2": outbox.Sent} {
		if got := state[id].State; got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if a := state["a-3"].Attempts; a != 1 {
		t.Errorf("a-3: %d attempts, want 1", a)
	}
	if a := state["a-4"].Attempts; a != 0 {
		t.Errorf("a-4: %d attempts, want 0 (it did not fail; it waits behind a-3)", a)
	}
	first := perKey(Drain(t, sub))["a"]
	// The batch delivered a-4 and a-5 past the lost a-3; publishing a's
	// rows one by one then stopped at a-3.
	if i := slices.Index(first, "a-4"); i < 0 || slices.Contains(first, "a-3") {
		t.Fatalf("a's deliveries %v: want a-4 delivered and a-3 not (the later version before its predecessor)", first)
	}
	failing.Store(false)
	clock.Advance(2 * time.Hour)
	if n, err := r.Drain(e.Ctx); n != 3 || err != nil {
		t.Fatalf("Drain after the failure: %d, %v; want 3 (a-3, a-4, a-5)", n, err)
	}
	if again := perKey(Drain(t, sub))["a"]; !slices.Equal(again, []string{"a-3", "a-4", "a-5"}) {
		t.Errorf("a's deliveries after the failure %v, want [a-3 a-4 a-5]", again)
	}
	for _, row := range e.Rows(outbox.Filter{}) {
		if row.State != outbox.Sent {
			t.Errorf("%s: %s, want sent", row.ID, row.State)
		}
	}
}

// testLeaseHolds: two relays with a lease much shorter than the time a
// batch takes to publish (a slow broker). On a store that claims by lease
// the holder renews it while it publishes, so the other relay never takes
// over a batch in flight: every row is published exactly once. (On
// PostgreSQL the row locks give the same.)
func testLeaseHolds[Tx any](t *testing.T, f Factory[Tx], b OutboxBroker, _ OutboxCaps) {
	const rows, lease = 100, 2 * time.Second
	e := SetupOutbox(t, f)
	var msgs []*outbox.Message
	for i := range rows {
		msgs = append(msgs, OM(fmt.Sprintf("l%03d", i), fmt.Sprintf("agg-%02d", i%20), 0, "x"))
	}
	e.Add(msgs...)
	var mu sync.Mutex
	published := map[string]int{}
	// A batch of 50 takes 3s, one and a half leases.
	topic := SlowTopic(b.Topic, 60*time.Millisecond, func(m *broker.Message) {
		mu.Lock()
		published[m.ID]++
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	var wg sync.WaitGroup
	var relays []*outbox.Relay
	for i := range 2 {
		r := e.SourceRelay(topic, Source{Lease: lease, PerAggregate: 5}, &outbox.RelayOptions{Owner: fmt.Sprintf("lease-%d", i), BatchSize: 50})
		relays = append(relays, r)
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				t.Errorf("relay: %v", err)
			}
		})
	}
	deadline := time.Now().Add(time.Minute)
	for {
		h, err := relays[0].Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Backlog == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var twice []string
	for id, n := range published {
		if n != 1 {
			twice = append(twice, fmt.Sprintf("%s×%d", id, n))
		}
	}
	slices.Sort(twice)
	if len(published) != rows || len(twice) > 0 {
		t.Errorf("%d of %d rows published; published more than once: %v", len(published), rows, twice[:min(len(twice), 10)])
	}
	for _, r := range relays {
		t.Logf("%s: %+v", r.Owner(), r.Stats())
	}
}
