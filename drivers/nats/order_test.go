package nats_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/nats"
)

// TestKeyScopedOrder proves the key-scoped order the package doc states:
// a consumer per key, filtered to SUBJECT.KEY with max_ack_pending 1,
// declares OrderQueue with head-of-line, delivers its key in publish
// order through nacks and redeliveries, and the keys' consumers run in
// parallel (a handler of one key waits until a handler of the other has
// started).
func TestKeyScopedOrder(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{})
	ctx := ctxT(t)
	keys := []string{"a", "b"}
	for _, k := range keys {
		if _, err := js.CreateConsumer(ctx, spec.Stream, jetstream.ConsumerConfig{Durable: "key-" + k, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 10 * time.Second, MaxAckPending: 1, FilterSubject: spec.Subject + "." + k}); err != nil {
			t.Fatal(err)
		}
	}
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	const per = 20
	var msgs []*broker.Message
	for i := 0; i < per; i++ {
		for _, k := range keys {
			msgs = append(msgs, &broker.Message{ID: fmt.Sprintf("%s-%d", k, i), Key: k, Headers: broker.Headers{{"seq", strconv.Itoa(i)}}})
		}
	}
	if err := top.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	finished := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	var once, fin [2]sync.Once
	parallel := make(chan bool, 2)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := make([][]int, len(keys))
	failed := map[string]bool{}
	for ki, k := range keys {
		sub, err := nats.OpenSubscription(ctx, js, spec.Stream, "key-"+k, &nats.SubscriptionOptions{Subject: spec.Subject})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if c := sub.Capabilities(); c.Ordering != capability.OrderQueue || !c.HeadOfLine {
			t.Fatalf("consumer key-%s: %s", k, c)
		}
		other := keys[1-ki]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
				if d.Message.Key != k {
					t.Errorf("consumer key-%s got key %q", k, d.Message.Key)
				}
				once[ki].Do(func() {
					close(started[k])
					select {
					case <-started[other]:
						parallel <- true
					case <-time.After(10 * time.Second):
						parallel <- false
					}
				})
				seq, _ := strconv.Atoi(d.Message.Headers.Get("seq"))
				mu.Lock()
				defer mu.Unlock()
				if seq%5 == 2 && !failed[d.Message.ID] {
					failed[d.Message.ID] = true
					return fmt.Errorf("injected failure") // nacked: it must come back before seq+1
				}
				results[ki] = append(results[ki], seq)
				if len(results[ki]) == per {
					fin[ki].Do(func() { close(finished[k]) })
				}
				return nil
			}, &broker.RunOptions{Concurrency: 4})
		}()
	}
	for _, k := range keys {
		select {
		case <-finished[k]:
		case <-time.After(45 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("key %s: handled %v of %d within 45s", k, results, per)
		}
	}
	cancel()
	wg.Wait()
	for ki, k := range keys {
		for i, seq := range results[ki] {
			if seq != i {
				t.Fatalf("key %s handled out of order: %v", k, results[ki])
			}
		}
	}
	for range keys {
		if !<-parallel {
			t.Fatalf("the keys' consumers did not run in parallel")
		}
	}
}
