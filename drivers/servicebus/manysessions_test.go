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
		name, path := e.createSubscription(t, sbemu.Entity{Sessions: true})
		top, err := servicebus.OpenTopic(e.client, name, &servicebus.TopicOptions{Admin: e.admin, Entity: servicebus.TopicProperties{RequiresSession: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { top.Close() })
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
				sub, err := servicebus.OpenSubscription(e.client, p.path, so)
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
	st, err := e.emu.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.DroppedConnections != 0 {
		t.Errorf("the emulator dropped %d connections (stats %+v)", st.DroppedConnections, st)
	}
	t.Logf("emulator stats: %+v", st)
}
