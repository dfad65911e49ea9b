package rabbit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
)

// noRetry makes a topic report every failure as it is: no resend.
var noRetry = &rabbit.TopicOptions{TopicOptions: broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}}}

// outcomes returns the error of each of n messages published in one call
// that returned err.
func outcomes(t *testing.T, err error, n int) []error {
	t.Helper()
	errs := make([]error, n)
	if err == nil {
		return errs
	}
	var be *broker.Error
	if n > 1 && errors.As(err, &be) && be.Messages != nil {
		if len(be.Messages) != n {
			t.Fatalf("%d outcomes for %d messages: %v", len(be.Messages), n, err)
		}
		return be.Messages
	}
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// queueIDs consumes every message of queue q and returns how many times
// each ID came.
func queueIDs(t *testing.T, c *rabbit.Conn, q string) map[string]int {
	t.Helper()
	ch, err := c.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", q, err)
	}
	ds, err := ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume %s: %v", q, err)
	}
	ids := map[string]int{}
	for range st.Messages {
		d, ok := <-ds
		if !ok {
			t.Fatalf("consumer of %s ended after %d of %d messages", q, len(ids), st.Messages)
		}
		ids[d.MessageId]++
	}
	return ids
}

// Routable and unroutable messages in flight together on one channel,
// single and batched, their IDs shared across goroutines and within a
// batch: each message's outcome is its own routing key's, and an
// unroutable one's return carries that key.
func TestUnroutableAmongRoutableConcurrently(t *testing.T) {
	ctx := ctxT(t)
	topic := unroutableTopic(t, "mixed", noRetry)

	// Learn, one at a time, which keys route nowhere, and their routing key.
	keys := make([]string, 16)
	returnedKey := map[string]string{} // key → the partition's routing key, for unroutable keys
	for i := range keys {
		keys[i] = string(rune('a' + i))
		err := topic.Publish(ctx, &broker.Message{ID: "learn", Key: keys[i], Body: []byte("x")})
		switch {
		case err == nil:
		case errors.Is(err, broker.ErrNotFound) && errors.Is(err, broker.ErrNotSent):
			var r amqp.Return
			if !topic.ErrorAs(err, &r) {
				t.Fatalf("key %s: no amqp.Return in %v", keys[i], err)
			}
			returnedKey[keys[i]] = r.RoutingKey
		default:
			t.Fatalf("key %s: %v", keys[i], err)
		}
	}
	if len(returnedKey) == 0 || len(returnedKey) == len(keys) {
		t.Fatalf("%d of %d keys unroutable: want some of each", len(returnedKey), len(keys))
	}

	const goroutines, rounds = 16, 30
	var wg sync.WaitGroup
	var checked atomic.Int64
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				n := 1
				if (g+r)%3 != 0 {
					n = 1 + (g*7+r*5)%20
				}
				msgs := make([]*broker.Message, n)
				for i := range msgs {
					// IDs shared by every goroutine and repeated within a batch.
					msgs[i] = &broker.Message{ID: fmt.Sprintf("shared-%d", (r+i)%3), Key: keys[(g*3+r*7+i*5)%len(keys)], Body: []byte("x")}
				}
				err := topic.Publish(ctx, msgs...)
				for i, e := range outcomes(t, err, n) {
					key := msgs[i].Key
					want, unroutable := returnedKey[key]
					switch {
					case !unroutable && e != nil:
						t.Errorf("key %s (routable), message %d of %d: %v", key, i, n, e)
					case unroutable && (!errors.Is(e, broker.ErrNotFound) || !errors.Is(e, broker.ErrNotSent)):
						t.Errorf("key %s (unroutable), message %d of %d: %v, want not found, not sent", key, i, n, e)
					case unroutable:
						var ret amqp.Return
						if !topic.ErrorAs(e, &ret) || ret.RoutingKey != want || ret.ReplyCode != amqp.NoRoute {
							t.Errorf("key %s, message %d of %d: return %+v, want routing key %s", key, i, n, ret, want)
						}
					}
					checked.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d outcomes checked", checked.Load())
}

// The exchange is deleted under 8 publishers: RabbitMQ closes the
// channel, and the publishes awaiting its confirms fail. Every
// message reported sent is in the queue, none reported not sent is, and
// those in flight at the close are maybe sent.
func TestChannelClosedWithPublishesInFlight(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("closed")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name})
	topic, err := rabbit.OpenTopic(ctx, c, top, noRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()

	const publishers = 8
	var (
		mu       sync.Mutex
		outcome  = map[string]error{}
		sent     atomic.Int64
		enough   = make(chan struct{})
		enoughMu sync.Once
		deleted  = make(chan struct{})
		wg       sync.WaitGroup
	)
	for g := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			failedAfter := false
			for r := 0; r < 5000 && !failedAfter; r++ {
				n := 1 + (g+r)%10
				msgs := make([]*broker.Message, n)
				for i := range msgs {
					msgs[i] = &broker.Message{ID: fmt.Sprintf("p%d-%d-%d", g, r, i), Body: []byte("x")}
				}
				err := topic.Publish(ctx, msgs...)
				isDeleted := false
				select {
				case <-deleted:
					isDeleted = true
				default:
				}
				mu.Lock()
				for i, e := range outcomes(t, err, n) {
					outcome[msgs[i].ID] = e
				}
				mu.Unlock()
				if err == nil && sent.Add(int64(n)) >= 200 {
					enoughMu.Do(func() { close(enough) })
				}
				if err != nil && isDeleted {
					failedAfter = true
				}
			}
		}()
	}
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("publishers did not get going")
	}
	ch, err := c.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete(name, false, false); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	close(deleted)
	wg.Wait()

	inQueue := queueIDs(t, c, name)
	var ok, maybe, not int
	for id, e := range outcome {
		switch {
		case e == nil:
			ok++
			if inQueue[id] != 1 {
				t.Errorf("%s reported sent, %d in the queue", id, inQueue[id])
			}
		case errors.Is(e, broker.ErrMaybeSent) && !errors.Is(e, broker.ErrNotSent):
			maybe++
		case errors.Is(e, broker.ErrNotSent) && !errors.Is(e, broker.ErrMaybeSent):
			not++
			if inQueue[id] != 0 {
				t.Errorf("%s reported not sent, in the queue: %v", id, e)
			}
		default:
			t.Errorf("%s: %v, want exactly one of maybe sent and not sent", id, e)
		}
	}
	for id, n := range inQueue {
		if _, published := outcome[id]; !published || n != 1 {
			t.Errorf("%s in the queue %d times (published: %v)", id, n, published)
		}
	}
	t.Logf("%d sent, %d maybe sent, %d not sent, %d in the queue", ok, maybe, not, len(inQueue))
	if maybe == 0 {
		t.Error("no message failed maybe sent: none was in flight when the channel closed")
	}
	// Recreate the exchange so that the topology's cleanup finds it.
	if err := rabbit.Declare(ctx, c, top); err != nil {
		t.Fatal(err)
	}
}

// cancelOnWrite is a connection that cancels a publish's context when
// that publish's frames are written: its caller leaves right after
// sending.
type cancelOnWrite struct {
	net.Conn
	cancel *atomic.Pointer[context.CancelFunc]
}

func (c cancelOnWrite) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if f := c.cancel.Swap(nil); f != nil {
		(*f)()
	}
	return n, err
}

// Thousands of publishes, each caller leaving right after its message was
// written (maybe sent): the channel goes on, a publish after them is
// confirmed, and every message written is in the queue.
func TestAbandonedPublishes(t *testing.T) {
	ctx := ctxT(t)
	var cancel atomic.Pointer[context.CancelFunc]
	c := dialWrapped(t, func(c net.Conn) net.Conn { return cancelOnWrite{Conn: c, cancel: &cancel} })
	name := uniqueName("abandoned")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name})
	topic, err := rabbit.OpenTopic(ctx, c, top, noRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	// The channel is opened by the first publish.
	if err := topic.Publish(ctx, &broker.Message{ID: "first", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	const n = 2048
	var abandoned, confirmed, notSent int
	for i := range n {
		pctx, pcancel := context.WithCancel(ctx)
		cancel.Store(&pcancel)
		err := topic.Publish(pctx, &broker.Message{ID: fmt.Sprintf("a%d", i), Body: []byte("x")})
		cancel.Store(nil)
		pcancel()
		switch {
		case err == nil:
			confirmed++
		case errors.Is(err, context.Canceled) && errors.Is(err, broker.ErrMaybeSent):
			abandoned++
		case errors.Is(err, broker.ErrNotSent):
			// A heartbeat's write cancelled it before it was sent.
			notSent++
		default:
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	t.Logf("%d abandoned, %d confirmed before their callers left, %d not sent", abandoned, confirmed, notSent)
	if abandoned < n/2 {
		t.Fatalf("%d publishes abandoned, want most of the %d", abandoned, n)
	}
	if err := topic.Publish(ctx, &broker.Message{ID: "last", Body: []byte("x")}); err != nil {
		t.Fatalf("publish after the abandoned ones: %v", err)
	}
	// Every message written is in the queue: the channel confirms in order.
	if got, want := len(queueIDs(t, c, name)), 2+n-notSent; got != want {
		t.Errorf("%d messages in the queue, want %d", got, want)
	}
}

// A batch of more than a thousand messages: every message is confirmed
// and in the queue once.
func TestPublishLargeBatch(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("parts")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name})
	topic, err := rabbit.OpenTopic(ctx, c, top, noRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	const n = 1029
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: fmt.Sprintf("m%d", i), Body: []byte("x")}
	}
	if err := topic.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	ids := queueIDs(t, c, name)
	for _, m := range msgs {
		if ids[m.ID] != 1 {
			t.Errorf("%s in the queue %d times", m.ID, ids[m.ID])
		}
	}
	if len(ids) != n {
		t.Errorf("%d messages in the queue, want %d", len(ids), n)
	}
}
