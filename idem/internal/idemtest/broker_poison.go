package idemtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem"
)

// testBrokerPoison runs Subscription.Run with Inbox.Wrap over good messages
// and messages whose IDs break the ID rules (Publish refuses them, so the
// handler gives them the IDs of PoisonIDs on receipt, as a foreign
// producer's would arrive): the good ones are applied once each, the
// poison ones are in the dead-letter queue with the reason, and the loop
// does not stall on them.
func testBrokerPoison[Tx any](t *testing.T, f Factory[Tx], b Broker) {
	if b.DeadLetters == nil {
		t.Skip("the broker harness opens no dead-letter queue")
	}
	e := Setup(t, f, "")
	sub := b.Subscribe(t)
	if !sub.Capabilities().DeadLetter {
		t.Skip("the subscription cannot dead-letter")
	}
	in, err := idem.NewInbox(e.Store, "poison", sub.Capabilities(), Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	var good []string
	for i := range PoisonIDs {
		good = append(good, fmt.Sprintf("good-%d", i))
		if err := b.Topic.Publish(e.Ctx, Msg(good[i], "x", "", 0), Msg(fmt.Sprintf("poison-%d", i), "poison", "", 0)); err != nil {
			t.Fatal(err)
		}
	}
	results := make(chan idem.Result, 4*len(PoisonIDs))
	h := e.Effect()
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
			var i int
			if _, err := fmt.Sscanf(d.Message.ID, "poison-%d", &i); err == nil {
				d.Message.ID = PoisonIDs[i]
			}
			r, err := in.Handle(ctx, d, h)
			select {
			case results <- r:
			case <-ctx.Done():
			}
			if r == idem.ResultDeadLettered && errors.Is(err, idem.ErrInvalidID) {
				return nil // settled; nothing for Run to report
			}
			return err
		}, &broker.RunOptions{Concurrency: 2})
	}()
	counts := map[idem.Result]int{}
	stalled := time.After(time.Minute) // a bound on the test, not a synchronisation
	for range 2 * len(PoisonIDs) {
		select {
		case r := <-results:
			counts[r]++
		case <-stalled:
			cancel()
			t.Fatalf("stalled: results so far %v (a poison message retried for ever?)", counts)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if counts[idem.ResultApplied] != len(good) || counts[idem.ResultDeadLettered] != len(PoisonIDs) {
		t.Errorf("results %v: want %d applied and %d dead-lettered", counts, len(good), len(PoisonIDs))
	}
	e.CheckEffects(good...)
	ds, err := poll(b.DeadLetters(t), 2*len(PoisonIDs))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(PoisonIDs) {
		t.Errorf("%d dead letters, want %d", len(ds), len(PoisonIDs))
	}
	for _, d := range ds {
		reason := d.Message.Headers.Get(driver.HeaderDeadLetterReason)
		if string(d.Message.Body) != "poison" || !strings.Contains(reason, "invalid message ID") {
			t.Errorf("dead letter %q (%q): reason %q", d.Message.ID, d.Message.Body, reason)
		}
	}
	if s := in.Stats(); s.StoreErrors != 0 {
		t.Errorf("stats %+v: store errors (a poison ID retried as a store failure)", s)
	}
}
