package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/nats"
)

// TestPrefetch: by default each AckAll also pulls the next batch; every
// message is received once, including when a receive asks for fewer than
// the pull took, and all are acked. Close
// returns the prefetched messages no receive took: a new subscription
// gets them at once (their second delivery), long before their AckWait
// (a minute) would have passed.
func TestPrefetch(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: time.Minute})
	ctx := ctxT(t)
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	const n = 60
	var msgs []*broker.Message
	for i := range n {
		msgs = append(msgs, &broker.Message{ID: fmt.Sprint("m", i), Body: []byte("x")})
	}
	if err := top.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	// The first through its URL's prefetch=true, the second by default.
	sub, err := broker.OpenSubscription(ctx, url+"/"+spec.Stream+"?consumer="+spec.Consumer+"&subject="+spec.Subject+"&prefetch=true")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	receive := func(s *broker.Subscription, max int) []*broker.Delivery {
		t.Helper()
		ds, err := s.Receive(ctx, max)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > max {
			t.Fatalf("receive of %d returned %d", max, len(ds))
		}
		for _, d := range ds {
			seen[d.Message.ID]++
		}
		return ds
	}
	// 10 then 4 (fewer than the prefetch of 10), until 40 are acked.
	for acked, max := 0, 10; acked < 40; max = 4 {
		ds := receive(sub, max)
		if errs := broker.AckAll(ctx, ds); errs != nil {
			t.Fatal(errs)
		}
		acked += len(ds)
	}
	// The last AckAll prefetched up to 4 more: Close returns them.
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	opts := &nats.SubscriptionOptions{Subject: spec.Subject}
	sub2, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	returned := 0 // the prefetched ones: delivered once before, to no one
	for len(seen) < n {
		ds := receive(sub2, 10)
		for _, d := range ds {
			if d.Attempt == 2 {
				returned++
			}
		}
		if rctx.Err() != nil {
			t.Fatalf("%d of %d received before AckWait: prefetched messages not returned at Close", len(seen), n)
		}
		if errs := broker.AckAll(ctx, ds); errs != nil {
			t.Fatal(errs)
		}
	}
	if returned == 0 {
		t.Errorf("no message came back with attempt 2: the last AckAll prefetched none, or Close did not return them")
	}
	for id, k := range seen {
		if k > 1 {
			t.Errorf("%s received %d times", id, k)
		}
	}
	cons, err := js.Consumer(ctx, spec.Stream, spec.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub2.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 || info.NumAckPending != 0 {
		t.Errorf("after all acked: %d pending, %d unacked", info.NumPending, info.NumAckPending)
	}
}

// waitAckPending waits until the consumer has want deliveries unacked:
// acks and pull requests are applied by the server after it read them.
func waitAckPending(t *testing.T, js jetstream.JetStream, spec nats.Spec, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, spec.Stream, spec.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatalf("waiting for %d unacked: %v", want, err)
		}
		if info.NumAckPending == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d unacked, want %d", info.NumAckPending, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestNoPrefetch: an AckAll pulls the next batch by default (the consumer
// has it unacked, in the client), with NoPrefetch (or the URL's
// prefetch=false) it does not: once the acks are applied nothing is
// unacked.
func TestNoPrefetch(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	ctx := ctxT(t)
	for name, open := range map[string]func(spec nats.Spec) (*broker.Subscription, error){
		"default": func(spec nats.Spec) (*broker.Subscription, error) {
			return nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
		},
		"NoPrefetch": func(spec nats.Spec) (*broker.Subscription, error) {
			return nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject, NoPrefetch: true})
		},
		"prefetch=false": func(spec nats.Spec) (*broker.Subscription, error) {
			return broker.OpenSubscription(ctx, url+"/"+spec.Stream+"?consumer="+spec.Consumer+"&subject="+spec.Subject+"&prefetch=false")
		},
	} {
		t.Run(name, func(t *testing.T) {
			spec := declare(t, js, nats.Spec{AckWait: time.Minute})
			publishN(t, js, spec, 20)
			sub, err := open(spec)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			receiveAck(t, sub, 5)
			want := 5 // the prefetch, of the size of the receive
			if name != "default" {
				want = 0
			}
			waitAckPending(t, js, spec, want)
		})
	}
}

// TestPrefetchExpired: a receive hands out no prefetched delivery whose
// AckWait passed before it took it (the server delivers it again, and a
// settle would be refused): every delivery it hands out can be acked.
func TestPrefetchExpired(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	const ackWait = 500 * time.Millisecond
	spec := declare(t, js, nats.Spec{AckWait: ackWait})
	ctx := ctxT(t)
	const n = 10
	publishN(t, js, spec, n)
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	receiveAck(t, sub, 5)
	waitAckPending(t, js, spec, 5) // prefetched
	// What is tested is the lock's expiry: time is its only signal.
	time.Sleep(ackWait + 100*time.Millisecond)
	acked := map[string]bool{}
	for len(acked) < n-5 {
		ds, err := sub.Receive(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range broker.AckAll(ctx, ds) {
			if err != nil {
				t.Fatalf("%s (attempt %d): %v", ds[i].Message.ID, ds[i].Attempt, err)
			}
		}
		for _, d := range ds {
			acked[d.Message.ID] = true
		}
	}
}

// TestRunPrefetch: Subscription.Run passes its MaxOutstanding to the
// driver (driver.Prefetcher), which prefetches that many: the consumer
// never has more than twice MaxOutstanding unacked, every message is
// handled once, and once Run ends and the subscription closes, nothing is
// left unacked.
func TestRunPrefetch(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: time.Minute})
	ctx := ctxT(t)
	const n, maxOut = 60, 4
	publishN(t, js, spec, n)
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, spec.Stream, spec.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	seen := map[string]int{}
	most := 0
	err = sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		most = max(most, info.NumAckPending)
		if seen[d.Message.ID]++; len(seen) == n {
			stop()
		}
		return nil
	}, &broker.RunOptions{MaxOutstanding: maxOut})
	if err != nil {
		t.Fatal(err)
	}
	if most > 2*maxOut {
		t.Errorf("%d unacked at most, want at most %d (twice MaxOutstanding)", most, 2*maxOut)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s handled %d times", id, k)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	waitAckPending(t, js, spec, 0)
}

// publishN publishes n messages, m0 to m(n-1), to spec's stream.
func publishN(t *testing.T, js jetstream.JetStream, spec nats.Spec, n int) {
	t.Helper()
	ctx := ctxT(t)
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: fmt.Sprint("m", i), Body: []byte("x")}
	}
	if err := top.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// receiveAck receives n deliveries of sub (in one receive) and acks them.
func receiveAck(t *testing.T, sub *broker.Subscription, n int) {
	t.Helper()
	ctx := ctxT(t)
	ds, err := sub.Receive(ctx, n)
	if err != nil || len(ds) != n {
		t.Fatalf("receive: %d, %v", len(ds), err)
	}
	if errs := broker.AckAll(ctx, ds); errs != nil {
		t.Fatal(errs)
	}
}

// TestDeadLettersNoPrefetch: a dead-letter subscription never prefetches
// (dead letters are read a few at a time, to be looked at or replayed):
// after a full receive and its acks nothing of the dead-letter stream is
// unacked, though more dead letters wait.
func TestDeadLettersNoPrefetch(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: time.Minute})
	const n = 10
	publishN(t, js, spec, n)
	ctx := ctxT(t)
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject, NoPrefetch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for dead := 0; dead < n; {
		ds, err := sub.Receive(ctx, n-dead)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if err := d.DeadLetter(ctx, "test"); err != nil {
				t.Fatal(err)
			}
			dead++
		}
	}
	dl, err := nats.OpenDeadLetters(ctx, js, spec.Stream, spec.Consumer, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	receiveAck(t, dl, 3)
	waitAckPending(t, js, nats.Spec{Stream: nats.DeadLetterStream(spec.Stream), Consumer: spec.Consumer}, 0)
}
