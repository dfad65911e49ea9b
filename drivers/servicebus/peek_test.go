package servicebus_test

import (
	"context"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestPeekDeadLetters: Peek shows a dead-letter sub-queue's messages with
// their reason without delivering them: after five looks a receive finds
// every message with the delivery count the first look showed.
func TestPeekDeadLetters(t *testing.T) {
	e := newEnv(t)
	mux := e.urlMux()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	q := e.createQueue(t, sbemu.Entity{DeliveryLimit: 5, Lock: 5 * time.Second})
	subURL := "servicebus://" + q + "?receive_wait=200ms"
	top, err := mux.OpenTopic(ctx, "servicebus://"+q)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := mux.OpenSubscription(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		if err := top.Publish(ctx, &broker.Message{ID: id, Body: []byte(id)}); err != nil {
			t.Fatal(err)
		}
	}
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

	var first map[string]int
	for look := 0; look < 5; look++ {
		dl, err := mux.OpenDeadLetters(ctx, subURL)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for {
			ps, err := dl.Peek(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) == 0 {
				break
			}
			for _, p := range ps {
				got[p.Message.ID] = p.Attempt
				if r := p.Message.Headers.Get(driver.HeaderDeadLetterReason); r != "cannot parse" {
					t.Errorf("look %d: %s has reason %q", look+1, p.Message.ID, r)
				}
			}
		}
		_ = dl.Close()
		if len(got) != len(ids) {
			t.Fatalf("look %d: peeked %v, want %v", look+1, got, ids)
		}
		if first == nil {
			first = got
		}
	}

	dl, err := mux.OpenDeadLetters(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	for n := 0; n < len(ids); {
		ds, err := dl.Receive(ctx, len(ids)-n)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Attempt != first[d.Message.ID] {
				t.Errorf("%s: attempt %d after five peeks, %d at the first", d.Message.ID, d.Attempt, first[d.Message.ID])
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
}
