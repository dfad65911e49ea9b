package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestRebalanceScale scales a group from 1 to 3 consumers and back to 1
// while messages are published and handled (kgo's default
// cooperative-sticky balancer), in both modes: the history checker finds
// nothing lost.
func TestRebalanceScale(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%t", ordered), func(t *testing.T) { rebalanceScale(t, ordered) })
	}
}

func rebalanceScale(t *testing.T, ordered bool) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 6, "rebalance")
	group := uniqueName("g")
	top, err := kafka.OpenTopic(t.Context(), e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	h := conformance.NewHistory()
	var handled atomic.Int64
	handler := func(ctx context.Context, d *broker.Delivery) error {
		h.Delivered(d.Message.ID)
		time.Sleep(time.Millisecond)
		h.Applied(d.Message.ID)
		handled.Add(1)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type consumer struct {
		sub     *broker.Subscription
		stop    context.CancelFunc
		done    chan error
		handled atomic.Int64
	}
	start := func() *consumer {
		s, err := e.openSub(ctx, t, topic, group, &kafka.SubscriptionOptions{Ordered: ordered})
		if err != nil {
			t.Fatal(err)
		}
		cctx, stop := context.WithCancel(ctx)
		c := &consumer{sub: s, stop: stop, done: make(chan error, 1)}
		go func() {
			c.done <- s.Run(cctx, func(ctx context.Context, d *broker.Delivery) error {
				c.handled.Add(1)
				return handler(ctx, d)
			}, &broker.RunOptions{Concurrency: 8})
		}()
		return c
	}
	stop := func(c *consumer) {
		c.stop()
		if err := <-c.done; err != nil {
			t.Errorf("run: %v", err)
		}
		if err := c.sub.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}

	const total = 3000
	var pubWG sync.WaitGroup
	pubWG.Add(1)
	go func() {
		defer pubWG.Done()
		for i := 0; i < total; i += 10 {
			var batch []*broker.Message
			for j := i; j < i+10; j++ {
				batch = append(batch, &broker.Message{ID: fmt.Sprintf("m-%d", j), Key: fmt.Sprint(j % 37), Body: []byte("x")})
			}
			if err := top.Publish(ctx, batch...); err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			for _, m := range batch {
				h.Sent(m.ID)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	waitFor := func(n int64) {
		deadline := time.Now().Add(60 * time.Second)
		for handled.Load() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	c1 := start()
	waitFor(300)
	c2, c3 := start(), start()
	waitFor(1200)
	t.Logf("scaled to 3 after %d handled", handled.Load())
	stop(c2)
	stop(c3)
	if c2.handled.Load() == 0 || c3.handled.Load() == 0 {
		t.Fatalf("the added consumers handled %d and %d messages: the group did not rebalance", c2.handled.Load(), c3.handled.Load())
	}
	t.Logf("scaled back to 1 after %d handled", handled.Load())
	pubWG.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r := h.Check(); len(r.Lost) == 0 && r.Sent == total {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop(c1)
	r := h.Check()
	t.Logf("handled by c1=%d c2=%d c3=%d; history: %s", c1.handled.Load(), c2.handled.Load(), c3.handled.Load(), r)
	if len(r.Lost) > 0 || len(r.Unexpected) > 0 || r.Sent != total {
		t.Fatalf("history: %s", r)
	}
}
