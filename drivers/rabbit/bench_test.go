package rabbit_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
)

// The benchmarks compare wary with raw amqp091-go doing the same work on
// the same kind of queue (quorum, single active consumer): publish with
// confirms (in batches, and one message at a time) and consume with
// per-message acks and the same prefetch. The two alternate in rounds of
// benchRound messages inside one benchmark, so that both see the same load
// on the machine (the server shares it; rounds are short, so that load
// changes hit both alike); b.N counts messages per side.
// Each reports wary-msgs/s, amqp091-msgs/s and wary/amqp091 in percent.
//
//	go test -run '^$' -bench . -benchtime 20000x ./drivers/rabbit/

const (
	benchPrefetch = 200
	benchBody     = 256
)

func benchTopology(b *testing.B, c *rabbit.Conn) rabbit.Topology {
	top, _ := declare(b, c, rabbit.Topology{Exchange: uniqueName("bench"), Queue: uniqueName("bench"), DeadLetter: true})
	return top
}

func benchMessages(n int) []*broker.Message {
	body := make([]byte, benchBody)
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: "m-" + strconv.Itoa(i), Body: body, Headers: broker.Headers{{"h", "v"}}}
	}
	return msgs
}

func rawPublishing(i int, body []byte) amqp.Publishing {
	return amqp.Publishing{MessageId: "m-" + strconv.Itoa(i), Body: body, Headers: amqp.Table{"h": "v"}, DeliveryMode: amqp.Persistent}
}

func rawChannel(b *testing.B) *amqp.Channel {
	conn, err := amqp.Dial(serverURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	return ch
}

// paired runs wary and raw alternately, n messages each per round, and
// reports both rates.
func paired(b *testing.B, round int, wary, raw func(n int)) {
	var tw, tr, cw, cr time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		start, cpu := time.Now(), cpuTime()
		wary(n)
		tw += time.Since(start)
		cw += cpuTime() - cpu
		start, cpu = time.Now(), cpuTime()
		raw(n)
		tr += time.Since(start)
		cr += cpuTime() - cpu
	}
	b.StopTimer()
	w, r := float64(b.N)/tw.Seconds(), float64(b.N)/tr.Seconds()
	b.ReportMetric(w, "wary-msgs/s")
	b.ReportMetric(r, "amqp091-msgs/s")
	b.ReportMetric(100*w/r, "wary/amqp091-%")
	// The client's CPU per message (user+system, whole process): on a
	// small machine the client takes it from the broker.
	b.ReportMetric(float64(cw.Microseconds())/float64(b.N), "wary-cpu-µs/msg")
	b.ReportMetric(float64(cr.Microseconds())/float64(b.N), "amqp091-cpu-µs/msg")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkPublish(b *testing.B) {
	for _, batch := range []int{100, 1} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			c := dial(b)
			b.Cleanup(func() { _ = c.Close() })
			ctx := context.Background()
			wtop, rtop := benchTopology(b, c), benchTopology(b, c)
			topic, err := rabbit.OpenTopic(ctx, c, wtop, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer topic.Close()
			ch := rawChannel(b)
			if err := ch.Confirm(false); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, benchBody)
			dcs := make([]*amqp.DeferredConfirmation, 0, batch)
			paired(b, 10*batch, func(n int) {
				for i := 0; i < n; i += batch {
					if err := topic.Publish(ctx, benchMessages(min(batch, n-i))...); err != nil {
						b.Fatal(err)
					}
				}
			}, func(n int) {
				for i := 0; i < n; i += batch {
					dcs = dcs[:0]
					for j := i; j < min(i+batch, n); j++ {
						dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, rtop.Exchange, "", true, false, rawPublishing(j, body))
						if err != nil {
							b.Fatal(err)
						}
						dcs = append(dcs, dc)
					}
					for _, dc := range dcs {
						if ok, err := dc.WaitContext(ctx); !ok || err != nil {
							b.Fatalf("confirm: ack=%t err=%v", ok, err)
						}
					}
				}
			})
		})
	}
}

// fill publishes n messages to the topology's exchange.
func fill(b *testing.B, c *rabbit.Conn, top rabbit.Topology, n int) {
	b.Helper()
	topic, err := rabbit.OpenTopic(b.Context(), c, top, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer topic.Close()
	msgs := benchMessages(n)
	for i := 0; i < n; i += 500 {
		if err := topic.Publish(context.Background(), msgs[i:min(i+500, n)]...); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConsume(b *testing.B) {
	c := dial(b)
	b.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wtop, rtop := benchTopology(b, c), benchTopology(b, c)
	fill(b, c, wtop, b.N)
	fill(b, c, rtop, b.N)
	so := &rabbit.SubscriptionOptions{NackDelay: true}
	so.Prefetch = benchPrefetch
	sub, err := rabbit.OpenSubscription(ctx, c, wtop, so)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	ch := rawChannel(b)
	if err := ch.Qos(benchPrefetch, 0, false); err != nil {
		b.Fatal(err)
	}
	ds, err := ch.Consume(rtop.Queue, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	paired(b, 400, func(n int) {
		for got := 0; got < n; {
			batch, err := sub.Receive(ctx, min(benchPrefetch, n-got))
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range batch {
				if err := d.Ack(ctx); err != nil {
					b.Fatal(err)
				}
			}
			got += len(batch)
		}
	}, func(n int) {
		for i := 0; i < n; i++ {
			d := <-ds
			if err := d.Ack(false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
