package servicebus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestManySessionSubscriptionsOneClient: session subscriptions on six topics,
// all on one client, each accepting up to 8 sessions at once (the default),
// letting them go after a short idle and reopened for every wave of
// messages published over several sessions, receive every message, and the
// emulator never drops the client's connection. Closing a subscription
// cancels its accepts in flight; the SDK's AMQP client later sends end on
// the channels of sessions whose begin it had abandoned, sessions the
// emulator has already ended or never saw. An emulator that dropped the
// connection for that (rhea does) left the sessions on it locked for a lock
// duration.
func TestManySessionSubscriptionsOneClient(t *testing.T) {
	const (
		topics   = 6
		waves    = 3
		keys     = 4
		perKey   = 2
		perWave  = keys * perKey
		expected = waves * perWave
	)
	e := newEnv(t)
	if e.emu.Real {
		t.Skip("reads the emulator's counters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type pair struct {
		top  *broker.Topic
		path string
	}
	pairs := make([]pair, topics)
	for i := range pairs {
		top, path := sessionTopic(t, e)
		pairs[i] = pair{top, path}
	}
	so := &servicebus.SubscriptionOptions{Admin: e.admin, SessionIdle: 100 * time.Millisecond, ReceiveWait: 200 * time.Millisecond}

	var wg sync.WaitGroup
	errs := make(chan error, topics)
	for i, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := map[string]bool{}
			for w := range waves {
				for k := range keys {
					for m := range perKey {
						id := fmt.Sprintf("t%d-w%d-k%d-m%d", i, w, k, m)
						if err := p.top.Publish(ctx, &broker.Message{ID: id, Key: fmt.Sprintf("k%d", k), Body: []byte(id)}); err != nil {
							errs <- fmt.Errorf("topic %d: publish %s: %w", i, id, err)
							return
						}
					}
				}
				// a subscription per wave: closing one cancels the accepts
				// it has in flight, some before the SDK's begin is answered
				sub, err := servicebus.OpenSubscription(ctx, e.client, p.path, so)
				if err != nil {
					errs <- fmt.Errorf("topic %d: %w", i, err)
					return
				}
				defer sub.Close()
				for len(seen) < (w+1)*perWave {
					ds, err := sub.Receive(ctx, perWave)
					if err != nil {
						errs <- fmt.Errorf("topic %d: wave %d: %d of %d messages received: %w", i, w, len(seen), expected, err)
						return
					}
					for _, d := range ds {
						seen[d.Message.ID] = true
						if err := d.Ack(ctx); err != nil {
							errs <- fmt.Errorf("topic %d: ack %s: %w", i, d.Message.ID, err)
							return
						}
					}
				}
				if err := sub.Close(); err != nil {
					errs <- fmt.Errorf("topic %d: close: %w", i, err)
					return
				}
			}
			if len(seen) != expected {
				errs <- fmt.Errorf("topic %d: %d distinct messages, want %d", i, len(seen), expected)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	noDroppedConnections(t, e)
}

// TestManySessionSubscriptionsAtOnce: twenty session subscriptions open at
// once on one client, each with the driver's defaults (8 session accepts
// at a time, sessions released after a second idle), all waiting for
// sessions (160 next-available accepts) when messages arrive on every
// topic, over more sessions than a subscription holds at once; every
// message is received, in order within its session, and settled, and the
// emulator never drops the client's connection. The SDK negotiates two
// $cbs claims for every session it accepts, one at a time per client: on
// an emulator that answered each claim in about 90 ms (its replies waited
// for the client's delayed ACKs), the accepts queued for many seconds
// behind each other and the run stalled. The context bounds the whole run
// (a liveness check, not a timing one).
func TestManySessionSubscriptionsAtOnce(t *testing.T) {
	const (
		topics   = 20
		keys     = 12 // sessions per topic: more than the 8 a subscription holds
		perKey   = 3
		perTopic = keys * perKey
	)
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tops := make([]*broker.Topic, topics)
	subs := make([]*broker.Subscription, topics)
	for i := range topics {
		top, path := sessionTopic(t, e)
		sub, err := servicebus.OpenSubscription(ctx, e.client, path, &servicebus.SubscriptionOptions{Admin: e.admin})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		tops[i], subs[i] = top, sub
	}

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*topics)
	for i := range topics {
		wg.Add(2)
		go func() { // receive and settle everything on topic i
			defer wg.Done()
			next := map[string]int{} // per session, the next message expected
			got := 0
			for got < perTopic {
				ds, err := subs[i].Receive(ctx, perTopic)
				if err != nil {
					errs <- fmt.Errorf("topic %d: %d of %d messages received: %w", i, got, perTopic, err)
					return
				}
				for _, d := range ds {
					var k, m int
					if _, err := fmt.Sscanf(d.Message.ID, "t%d-k%d-m%d", new(int), &k, &m); err != nil {
						errs <- fmt.Errorf("topic %d: message %q: %w", i, d.Message.ID, err)
						return
					}
					key := d.Message.Key
					if key != fmt.Sprintf("k%d", k) {
						errs <- fmt.Errorf("topic %d: message %s came with session %q", i, d.Message.ID, key)
						return
					}
					if m != next[key] {
						errs <- fmt.Errorf("topic %d: session %s: got message %d, want %d", i, key, m, next[key])
						return
					}
					if err := d.Ack(ctx); err != nil {
						errs <- fmt.Errorf("topic %d: ack %s: %w", i, d.Message.ID, err)
						return
					}
					next[key]++
					got++
				}
			}
		}()
		go func() { // publish to every session of topic i
			defer wg.Done()
			for m := range perKey {
				for k := range keys {
					id := fmt.Sprintf("t%d-k%d-m%d", i, k, m)
					if err := tops[i].Publish(ctx, &broker.Message{ID: id, Key: fmt.Sprintf("k%d", k), Body: []byte(id)}); err != nil {
						errs <- fmt.Errorf("topic %d: publish %s: %w", i, id, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		t.Error(err)
		failed = true
	}
	if !failed {
		t.Logf("%d messages on %d topics received and settled in %v", topics*perTopic, topics, time.Since(start).Round(time.Millisecond))
	}
	if !e.emu.Real {
		noDroppedConnections(t, e)
	}
}

// sessionTopic creates a topic whose subscription requires sessions and
// opens the driver's topic on it; it returns the topic and the
// subscription's path.
func sessionTopic(t *testing.T, e *env) (*broker.Topic, string) {
	t.Helper()
	name, path := e.createSubscription(t, sbemu.Entity{Sessions: true})
	top, err := servicebus.OpenTopic(t.Context(), e.client, name, &servicebus.TopicOptions{Admin: e.admin, Entity: servicebus.TopicProperties{RequiresSession: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { top.Close() })
	return top, path
}

// noDroppedConnections fails the test if the emulator dropped a connection.
func noDroppedConnections(t *testing.T, e *env) {
	t.Helper()
	st, err := e.emu.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.DroppedConnections != 0 {
		t.Errorf("the emulator dropped %d connections (stats %+v)", st.DroppedConnections, st)
	}
	t.Logf("emulator stats: %+v", st)
}
