package rabbit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/rabbit"
)

// TestDeadLettersSurviveListing: reading a dead-letter queue the way
// `wary dlq list` and the console do (receive each message, holding all,
// then put them back with Nack) sees every message, more than the
// subscription default prefetch of 2, and raises x-delivery-count by one
// on every look before RabbitMQ 4.3, since AMQP 0-9-1 has no peek; the
// dead-letter queue Declare makes has no delivery limit (none on
// RabbitMQ 3.x, x-delivery-limit -1 from 4.0, where the default is 20),
// so 25 looks lose nothing. Checked on the queue's declaration as the
// management API reports it, and by reading every message back.
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
			// Before RabbitMQ 4.3 every return counts, the put-back's
			// basic.nack too; from 4.3 it does not (Attempt also counts
			// the delivery that dead-lettered it).
			if look == looks && q.Type == "quorum" && a > looks+2 {
				t.Errorf("after %d looks %s has attempt %d, want at most %d: a look counted more than once", looks, id, a, looks+2)
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
			if d.Message.Headers.Get(driver.HeaderDeadLetterReason) != "cannot parse" {
				t.Errorf("%s: reason %q", d.Message.ID, d.Message.Headers.Get(driver.HeaderDeadLetterReason))
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

// TestDeadLetterListingCountsOnce (issue 44): a quorum dead-letter queue
// declared otherwise than by wary, with x-delivery-limit 3, and no
// dead-letter exchange of its own, which drops what passes its limit.
// Listed three times the way `wary dlq list` does (receive all, Nack
// each, close), its messages are all still there: each look puts them
// back with basic.cancel, then basic.nack, so that a look counts at most
// once (once on RabbitMQ 3.x, checked on 3.10; not at all toward the
// limit from 4.3, where basic.nack is a release). The old put-back,
// basic.reject while the consumer was still open, counted each look
// twice before 4.3 (the reject, and the return at close of the copy the
// consumer took again), and lost both messages at the second look.
func TestDeadLetterListingCountsOnce(t *testing.T) {
	ctx := ctxT(t)
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	const limit = 3
	ids := []string{"a", "b"}
	dlq, subURL := handDeadLetterQueue(t, c, amqp.Table{"x-delivery-limit": limit}, ids...)
	mux := rabbitMux()
	v, _ := c.Connection().Properties["version"].(string)

	// The dead letters' capabilities state the queue's own limit, read
	// from the broker: through the management API, where the URL's
	// implied "no limit" conflicts with it; over AMQP the argument, with
	// the limit unread (a policy, which AMQP cannot show, could change it).
	for _, u := range []string{subURL, subURL + "&management=off"} {
		dl, err := mux.OpenDeadLetters(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		caps := dl.Capabilities()
		_ = dl.Close()
		viaAPI := strings.Contains(caps.Source.Read, "management API")
		switch {
		case caps.DeliveryLimit != limit+1:
			t.Errorf("%s: dead letters state delivery limit %d, want %d (%+v)", u, caps.DeliveryLimit, limit+1, caps.Source)
		case viaAPI && (len(caps.Source.Conflicts) != 1 || caps.Source.Conflicts[0].Setting != capability.SettingDeliveryLimit):
			t.Errorf("%s: want the limit in conflict with the reader's, have %+v", u, caps.Source)
		case !viaAPI && !caps.Source.IsUnread(capability.SettingDeliveryLimit):
			t.Errorf("%s: read over AMQP, want the limit unread, have %+v", u, caps.Source)
		}
	}
	prev := map[string]int{}
	for look := 1; look <= limit; look++ {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		attempts := listOnce(lctx, t, mux, subURL, len(ids))
		cancel()
		for _, id := range ids {
			a := attempts[id]
			if look > 1 {
				switch rise := a - prev[id]; {
				case rise < 0 || rise > 1:
					t.Errorf("look %d: %s has attempt %d after %d: a look counted %d times", look, id, a, prev[id], rise)
				case strings.HasPrefix(v, "3.") && rise != 1:
					// Every return counts on RabbitMQ 3.x, a nack too.
					t.Errorf("look %d: %s has attempt %d after %d on RabbitMQ %s, which counts every return once", look, id, a, prev[id], v)
				}
			}
			prev[id] = a
		}
	}
	// A quorum queue applies a channel's returns after the channel has
	// moved on: poll its count of ready messages until both are back.
	ch, err := c.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		q, err := ch.QueueDeclarePassive(dlq, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.Messages == len(ids) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("after %d looks the dead-letter queue holds %d ready messages, want %d", limit, q.Messages, len(ids))
		}
	}
}

// handDeadLetterQueue declares, as a user's program would (not through
// Topology), a fanout dead-letter exchange and a quorum dead-letter queue
// bound to it with args, deleted at cleanup, and publishes there (with
// confirms) a message for each of ids, as a dead letter arrives; it
// returns the queue and a consumer's subscription URL that names them.
func handDeadLetterQueue(t *testing.T, c *rabbit.Conn, args amqp.Table, ids ...string) (dlq, subURL string) {
	t.Helper()
	ctx := ctxT(t)
	base := uniqueName("dlhand")
	dlx := base + ".dlx"
	dlq = base + ".dlq"
	ch, err := c.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	t.Cleanup(func() {
		if ch, err := c.Connection().Channel(); err == nil {
			_, _ = ch.QueueDelete(dlq, false, false, false)
			_ = ch.ExchangeDelete(dlx, false, false)
			_ = ch.Close()
		}
	})
	all := amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
	for k, v := range args {
		all[k] = v
	}
	if err := ch.ExchangeDeclare(dlx, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, all); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(dlq, "", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, dlx, "", false, false, amqp.Publishing{
			MessageId: id, Body: []byte(id), Headers: amqp.Table{driver.HeaderDeadLetterReason: "cannot parse"}})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publish %s: confirmed %t, %v", id, ok, err)
		}
	}
	return dlq, "rabbit://" + base + "?dead_letter_exchange=" + dlx + "&dead_letter_queue=" + dlq
}

// TestDeadLetterReaderReceivesAfterNack: a reader that receives one dead
// letter, puts it back, and receives again sees every other one too: the
// put-back cancels its consumer, and what the broker had pushed to that
// consumer ahead (a prefetch of 1000) goes back with it rather than stay
// stranded on the old channel; the next receive registers a new consumer.
// Many rounds of this do not pile up channels.
func TestDeadLetterReaderReceivesAfterNack(t *testing.T) {
	ctx := ctxT(t)
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ids := []string{"a", "b", "c", "d"}
	_, subURL := handDeadLetterQueue(t, c, nil, ids...)
	dl, err := rabbitMux().OpenDeadLetters(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	seen := map[string]int{}
	for round := 0; len(seen) < len(ids) || round < 50; round++ {
		ds, err := dl.Receive(ctx, 1)
		if err != nil {
			t.Fatalf("round %d (seen %v): %v", round, seen, err)
		}
		for _, d := range ds {
			seen[d.Message.ID]++
			if err := d.Nack(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := rabbit.RetiredConsumers(dl); n > 1 {
		t.Errorf("after %d put-backs the reader keeps %d stopped consumers open, want at most 1", len(seen), n)
	}
}
