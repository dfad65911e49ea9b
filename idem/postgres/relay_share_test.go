package postgres_test

import (
	"fmt"
	"testing"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
)

// TestRelayClaimsItsShare: a relay whose claims pipeline (two loops), on a
// backlog over few aggregates, takes every aggregate's head while it does
// not know it is behind; once a large batch told it so, and how many
// aggregates have due rows, each claim takes its share of them (half, with
// Pipeline 2) with as many rows as BatchSize allows, so that the other
// loop finds the other half instead of nothing. Before, every claim took
// all six heads, four rows each, and a second loop found nothing until
// the batch was marked.
func TestRelayClaimsItsShare(t *testing.T) {
	e := idemtest.SetupOutbox(t, newDB)
	var msgs []*outbox.Message
	for seq := 1; seq <= 20; seq++ {
		for a := range 6 {
			msgs = append(msgs, idemtest.OM(fmt.Sprintf("%c-%d", 'a'+a, seq), string(rune('a'+a)), int64(seq), "x"))
		}
	}
	e.Add(msgs...)
	r := e.SourceRelay(outboxBroker(t).Topic, idemtest.Source{PerAggregate: 10, Pipeline: 2}, &outbox.RelayOptions{BatchSize: 24})
	sent := func() string {
		n := map[string]int{}
		for _, row := range e.Rows(outbox.Filter{States: []outbox.State{outbox.Sent}}) {
			n[row.AggregateID]++
		}
		return fmt.Sprintf("a:%d b:%d c:%d d:%d e:%d f:%d", n["a"], n["b"], n["c"], n["d"], n["e"], n["f"])
	}
	for i, want := range []string{
		"a:4 b:4 c:4 d:4 e:4 f:4",    // every head: not known to be behind
		"a:12 b:12 c:12 d:4 e:4 f:4", // half the six aggregates, 8 rows each
		"a:12 b:12 c:12 d:12 e:12 f:12",
	} {
		if n, err := r.RunOnce(e.Ctx); n != 24 || err != nil {
			t.Fatalf("claim %d: %d published, %v; want 24", i+1, n, err)
		}
		if got := sent(); got != want {
			t.Errorf("after claim %d, sent %s; want %s", i+1, got, want)
		}
	}
}
