package idemtest

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/store"
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
	r := e.Relay(topic, &idem.RelayOptions{Now: clock.Now, Backoff: broker.Backoff{Initial: time.Hour, Max: time.Hour}})
	if n, err := r.Drain(e.Ctx); n != 4 || err != nil {
		t.Fatalf("Drain: %d, %v; want 4 (a-1, a-2, b-1, b-2)", n, err)
	}
	state := map[string]idem.OutboxRow{}
	for _, row := range e.Rows(store.OutboxFilter{}) {
		state[row.ID] = row
	}
	for id, want := range map[string]idem.OutboxState{"a-1": idem.OutboxSent, "a-2": idem.OutboxSent, "a-3": idem.OutboxPending,
		"a-4": idem.OutboxPending, "a-5": idem.OutboxPending, "b-1": idem.OutboxSent, "b-2": idem.OutboxSent} {
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
	for _, row := range e.Rows(store.OutboxFilter{}) {
		if row.State != idem.OutboxSent {
			t.Errorf("%s: %s, want sent", row.ID, row.State)
		}
	}
}
