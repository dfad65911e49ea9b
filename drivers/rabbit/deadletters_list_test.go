package rabbit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/wary-go/wary/broker"
)

// TestDeadLettersSurviveListing: reading a dead-letter queue the way
// `wary dlq list` and the console do (receive each message, holding all,
// then put them back with Nack) sees every message, more than the
// subscription default prefetch of 2, and raises x-delivery-count by one
// or two on every look, since AMQP 0-9-1 has no peek; the dead-letter
// queue Declare makes has no delivery limit (none on RabbitMQ 3.x,
// x-delivery-limit -1 from 4.0, where the default is 20), so 25 looks
// lose nothing. Checked on the queue's declaration as the management API
// reports it, and by reading every message back.
func TestDeadLettersSurviveListing(t *testing.T) {
	ctx := ctxT(t)
	ids := []string{"a", "b", "c"}
	top, mux, subURL, sub := deadLetterSetup(t, "dllist", "", ids...)
	for n := 0; n < len(ids); {
		ds, err := sub.Receive(ctx, len(ids)-n)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if err := d.DeadLetter(ctx, "cannot parse"); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	_ = sub.Close()

	// No delivery limit on the dead-letter queue, from its arguments or
	// a policy.
	var q struct {
		Type      string                     `json:"type"`
		Arguments map[string]json.RawMessage `json:"arguments"`
		Effective map[string]json.RawMessage `json:"effective_policy_definition"`
	}
	if err := mgmtJSON(ctx, http.MethodGet, "/api/queues/%2F/"+url.PathEscape(top.DeadLetterQueue()), "", &q); err != nil {
		t.Fatal(err)
	}
	if lim, ok := q.Arguments["x-delivery-limit"]; ok && string(lim) != "-1" {
		t.Errorf("dead-letter queue %s (%s) has x-delivery-limit %s", top.DeadLetterQueue(), q.Type, lim)
	}
	if lim, ok := q.Effective["delivery-limit"]; ok {
		t.Errorf("a policy gives dead-letter queue %s delivery-limit %s", top.DeadLetterQueue(), lim)
	}

	// 25 listings (more than RabbitMQ 4's default limit of 20), then a
	// last one that sees every message, each counted once per look.
	const looks = 25
	for look := 0; look <= looks; look++ {
		attempts := listOnce(ctx, t, mux, subURL, len(ids))
		for _, id := range ids {
			a, ok := attempts[id]
			if !ok {
				t.Fatalf("look %d: %s is gone from the dead-letter queue (have %v)", look+1, id, attempts)
			}
			// Before RabbitMQ 4.3 every return counts: the put-back, and
			// the return at close of what the open consumer took again
			// (Attempt also counts the delivery that dead-lettered it).
			if look == looks && q.Type == "quorum" && (a <= looks || a > 2*looks+2) {
				t.Errorf("after %d looks %s has attempt %d, want %d to %d", looks, id, a, looks+1, 2*looks+2)
			}
		}
	}
}

// listOnce opens the dead letters of subURL, receives want messages and
// puts them all back, as `wary dlq list` does; it returns each one's
// Attempt.
func listOnce(ctx context.Context, t *testing.T, mux *broker.URLMux, subURL string, want int) map[string]int {
	t.Helper()
	dl, err := mux.OpenDeadLetters(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	got := map[string]int{}
	var held []*broker.Delivery
	for len(held) < want {
		ds, err := dl.Receive(ctx, want-len(held))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got[d.Message.ID] = d.Attempt
			if d.Message.Headers[broker.HeaderDeadLetterReason] != "cannot parse" {
				t.Errorf("%s: reason %q", d.Message.ID, d.Message.Headers[broker.HeaderDeadLetterReason])
			}
		}
		held = append(held, ds...)
	}
	for _, d := range held {
		if err := d.Nack(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	return got
}
