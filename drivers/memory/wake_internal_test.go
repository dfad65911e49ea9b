package memory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
)

// consumeOneGroup publishes n messages of one message group to a topic of
// profile and consumes them with c consumers, one message at a time; it
// returns the subscription's queue.
func consumeOneGroup(tb testing.TB, profile Profile, c, n int) *queue {
	tb.Helper()
	b := New(nil)
	defer b.Close()
	cfg := &TopicConfig{Profile: profile}
	if err := b.CreateTopic("t", cfg); err != nil {
		tb.Fatal(err)
	}
	if err := b.CreateSubscription("t", "s"); err != nil {
		tb.Fatal(err)
	}
	top, err := b.OpenTopic("t", nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer top.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: fmt.Sprint(i), Key: "group", Body: []byte("x")}
	}
	if err := top.Publish(ctx, msgs...); err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	left := n
	var wg sync.WaitGroup
	for range c {
		sub, err := b.OpenSubscription("t", "s", nil)
		if err != nil {
			tb.Fatal(err)
		}
		defer sub.Close()
		wg.Go(func() {
			for {
				ds, err := sub.Receive(ctx, 1)
				if err != nil {
					return // canceled once all are consumed
				}
				for _, d := range ds {
					if err := d.Ack(ctx); err != nil {
						tb.Error(err)
					}
				}
				mu.Lock()
				left -= len(ds)
				if left == 0 {
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if left != 0 {
		tb.Fatalf("%d messages not consumed", left)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.topics["t"].subs["s"]
}

// TestNotifyWakesOne: a change to a queue whose receivers are alike (one
// message group of SQS FIFO here) wakes one waiting receiver, not all of
// them: with 50 consumers of one group, waking all after every settle had
// 49 of them find nothing each time. A receiver that had the turn and
// leaves without taking passes it on. A partitioned queue, whose receivers
// own different partitions, still wakes them all.
func TestNotifyWakesOne(t *testing.T) {
	b := New(nil)
	defer b.Close()
	woken := func(ws []chan struct{}) (n int) {
		for _, w := range ws {
			select {
			case <-w:
				n++
			default:
			}
		}
		return n
	}
	for _, c := range []struct {
		profile Profile
		want    int
	}{{SQSFIFO, 1}, {Queue, 1}, {ServiceBus, 1}, {Partitioned, 50}} {
		q := newQueue(b, "q", TopicConfig{Profile: c.profile, Partitions: 4}, false)
		ws := make([]chan struct{}, 50)
		for i := range ws {
			ws[i] = q.wait(false)
		}
		q.notify()
		if n := woken(ws); n != c.want {
			t.Errorf("%s: one change woke %d of 50 receivers, want %d", c.profile, n, c.want)
		}
		if c.profile == Partitioned {
			continue
		}
		q.leave(ws[0]) // woken, and gone without taking
		if n := woken(ws); n != 2 || woken(ws[1:2]) != 1 {
			t.Errorf("%s: after the woken receiver left, %d woken, want the next one too", c.profile, n)
		}
		q.leave(ws[10]) // not woken: leaves the line, wakes nobody
		if n := woken(ws); n != 2 || len(q.waiters) != 47 {
			t.Errorf("%s: a waiting receiver that left woke another (%d woken) or stayed in line (%d waiting)", c.profile, n, len(q.waiters))
		}
	}
}

// TestOneGroupManyConsumers: 50 consumers of one message group take its
// 500 messages one at a time to the last: no turn is lost on the way.
func TestOneGroupManyConsumers(t *testing.T) {
	q := consumeOneGroup(t, SQSFIFO, 50, 500)
	t.Logf("%d receivers woke to find nothing, for 500 messages", q.wakes)
}

// BenchmarkOneGroupManyConsumers: CPU for 50 consumers of one message
// group (SQS FIFO), beside the queue profile.
func BenchmarkOneGroupManyConsumers(b *testing.B) {
	for _, p := range []Profile{SQSFIFO, Queue} {
		b.Run(string(p), func(b *testing.B) {
			futile := 0
			for range b.N {
				futile += consumeOneGroup(b, p, 50, 5000).wakes
			}
			b.ReportMetric(float64(futile)/float64(b.N*5000), "futile-wakes/msg")
		})
	}
}

// TestWokenReceiverKeepsItsPlace: a receiver woken to find nothing (the
// one before it took the message) waits again at the front of the line, so
// a receiver that comes straight back for more does not take every turn.
// At the back, a consumer joining a busy queue never received (the soak's
// rebalance 1→3 saw two of three consumers idle for a minute).
func TestWokenReceiverKeepsItsPlace(t *testing.T) {
	b := New(nil)
	defer b.Close()
	q := newQueue(b, "q", TopicConfig{Profile: Queue}, false)
	busy, joined := q.wait(false), q.wait(false)
	q.notify() // a message: busy's turn
	<-busy
	q.taken() // busy took it and passes the turn on
	<-joined
	busy = q.wait(false)  // busy is back for more before joined looks
	joined = q.wait(true) // joined found nothing
	q.notify()            // the next message
	select {
	case <-joined:
	case <-busy:
		t.Fatal("the receiver that had the last message has the next turn too; the one woken for nothing lost its place")
	}
}
