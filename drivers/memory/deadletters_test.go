package memory_test

import (
	"errors"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
)

// TestOpenDeadLettersURL: a message dead-lettered through the consumer's
// subscription, by DeadLetter or by the delivery limit, is read back with
// its reason through broker.OpenDeadLetters on the consumer's own URL.
func TestOpenDeadLettersURL(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	mux := new(broker.URLMux)
	o := &memory.URLOpener{Broker: b}
	mux.RegisterTopic(memory.Scheme, o)
	mux.RegisterSubscription(memory.Scheme, o)
	const subURL = "mem://orders/billing?profile=queue&limit=2"

	top, err := mux.OpenTopic(bg, "mem://orders?profile=queue&limit=2")
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := mux.OpenSubscription(bg, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, id := range []string{"poison", "limit"} {
		if err := top.Publish(bg, msg(id, "")); err != nil {
			t.Fatal(err)
		}
	}
	// "poison" is dead-lettered on demand, "limit" by the delivery limit
	// (nacked on its second delivery).
	for settled := 0; settled < 3; {
		ds, err := sub.Receive(bg, 1)
		if err != nil {
			t.Fatal(err)
		}
		d := ds[0]
		if d.Message.ID == "poison" {
			err = d.DeadLetter(bg, "cannot parse")
		} else {
			err = d.Nack(bg, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		settled++
	}

	dl, err := mux.OpenDeadLetters(bg, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	got := map[string]string{}
	for len(got) < 2 {
		ds, err := dl.Receive(bg, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got[d.Message.ID] = d.Message.Headers.Get(driver.HeaderDeadLetterReason)
			if err := d.Ack(bg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got["poison"] != "cannot parse" || got["limit"] == "" {
		t.Fatalf("dead letters and reasons: %q", got)
	}

	for _, bad := range []string{"mem://orders", "mem://orders/billing/more", "mem://orders/billing?colour=red"} {
		if _, err := mux.OpenDeadLetters(bg, bad); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("OpenDeadLetters(%s) = %v, want ErrInvalid", bad, err)
		}
	}
}

// TestOpenDeadLettersDefaultMux: importing the package registers the
// dead-letter opener on the default mux too, on Default().
func TestOpenDeadLettersDefaultMux(t *testing.T) {
	const subURL = "mem://memory-test-dead-default/billing"
	sub, err := broker.OpenSubscription(bg, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	top, err := memory.Default().OpenTopic("memory-test-dead-default", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if err := top.Publish(bg, msg("x", "")); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds[0].DeadLetter(bg, "no"); err != nil {
		t.Fatal(err)
	}
	dl, err := broker.OpenDeadLetters(bg, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	ds, err = dl.Receive(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Message.ID != "x" || ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason) != "no" {
		t.Fatalf("dead letter %v", ds[0].Message)
	}
}
