package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/nats"
)

// TestPrefetch: with SubscriptionOptions.Prefetch each AckAll also pulls
// the next batch; every message is received once, including when a
// receive asks for fewer than the pull took, and all are acked. Close
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
	// The first through its URL's prefetch=true, the second in Go.
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
	opts := &nats.SubscriptionOptions{Subject: spec.Subject, Prefetch: true}
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
