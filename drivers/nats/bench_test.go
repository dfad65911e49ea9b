package nats_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/nats"
	"github.com/wary-go/wary/internal/benchpair"
)

// The benchmarks compare wary with raw nats.go doing the same work on
// streams of the same configuration (16 keys as subject tokens, 256-byte
// bodies, one header): publish in batches of 100 with Nats-Msg-Id,
// waiting for every PubAck (PublishMsgAsync, then each future), and
// consume (a pull of up to 100, then ack each). wary's acks are published
// and flushed once per AckAll (it returns once the server has read them);
// the raw consumer's are nats.go's Ack, sent without waiting (AckSync
// would wait for each in turn); by default wary sends the next pull
// before a full receive returns (prefetch), BenchmarkConsumeNoPrefetch
// opens its subscription with NoPrefetch. The consume benchmarks have a
// third contender, the bound (bound-msgs/s, wary/bound-%): raw nats.go
// with AckAll's guarantee, a flush after each batch's acks. The
// contenders alternate in rounds inside one benchmark, so that all see
// the same load on the machine; b.N counts messages per side.
//
//	go -C drivers/nats test -run '^$' -bench . -benchtime 20000x -count 5 .

const (
	benchKeys  = 16
	benchBody  = 256
	benchBatch = 100
)

var benchSeq atomic.Int64

func benchID() string {
	return "b" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(benchSeq.Add(1), 10)
}

func benchBodyBytes() []byte {
	body := make([]byte, benchBody)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	return body
}

func benchMessages(n int) []*broker.Message {
	body := benchBodyBytes()
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: benchID(), Key: "k" + strconv.Itoa(i%benchKeys), Body: body, Headers: broker.Headers{{"h", "v"}}}
	}
	return msgs
}

func rawPublish(b *testing.B, js jetstream.JetStream, subject string, n int) {
	body := benchBodyBytes()
	futures := make([]jetstream.PubAckFuture, 0, benchBatch)
	for i := 0; i < n; i += benchBatch {
		futures = futures[:0]
		for j := i; j < min(i+benchBatch, n); j++ {
			m := &natsgo.Msg{Subject: subject + ".k" + strconv.Itoa(j%benchKeys), Header: natsgo.Header{"h": {"v"}}, Data: body}
			f, err := js.PublishMsgAsync(m, jetstream.WithMsgID(benchID()))
			if err != nil {
				b.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
	}
}

func benchSpec(b *testing.B, js jetstream.JetStream) nats.Spec {
	return declare(b, js, nats.Spec{AckWait: time.Minute})
}

func BenchmarkPublish(b *testing.B) {
	url := serverURL(b)
	_, js := connect(b, url)
	_, rjs := connect(b, url)
	ctx := context.Background()
	ws, rs := benchSpec(b, js), benchSpec(b, rjs)
	topic, err := nats.OpenTopic(ctx, js, ws.Stream, &nats.TopicOptions{Subject: ws.Subject})
	if err != nil {
		b.Fatal(err)
	}
	defer topic.Close()
	benchpair.Run(b, 1000, func(n int) {
		for i := 0; i < n; i += benchBatch {
			if err := topic.Publish(ctx, benchMessages(min(benchBatch, n-i))...); err != nil {
				b.Fatal(err)
			}
		}
	}, func(n int) { rawPublish(b, rjs, rs.Subject, n) })
}

func BenchmarkConsume(b *testing.B) { benchConsume(b, false) }

// BenchmarkConsumeNoPrefetch is BenchmarkConsume with
// SubscriptionOptions.NoPrefetch: no pull is sent with the acks.
func BenchmarkConsumeNoPrefetch(b *testing.B) { benchConsume(b, true) }

func benchConsume(b *testing.B, noPrefetch bool) {
	url := serverURL(b)
	_, js := connect(b, url)
	_, rjs := connect(b, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ws, rs := benchSpec(b, js), benchSpec(b, rjs)
	rawPublish(b, js, ws.Subject, b.N)
	rawPublish(b, rjs, rs.Subject, b.N)
	sub, err := nats.OpenSubscription(ctx, js, ws.Stream, ws.Consumer, &nats.SubscriptionOptions{Subject: ws.Subject, NoPrefetch: noPrefetch})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	cons, err := rjs.Consumer(ctx, rs.Stream, rs.Consumer)
	if err != nil {
		b.Fatal(err)
	}
	// The bound: raw nats.go with AckAll's guarantee, a flush after each
	// batch's acks (it returns once the server has read them), on a
	// third stream.
	_, fjs := connect(b, url)
	fs := benchSpec(b, fjs)
	rawPublish(b, fjs, fs.Subject, b.N)
	fcons, err := fjs.Consumer(ctx, fs.Stream, fs.Consumer)
	if err != nil {
		b.Fatal(err)
	}
	benchpair.RunBound(b, 1000, func(n int) {
		for got := 0; got < n; {
			ds, err := sub.Receive(ctx, min(benchBatch, n-got))
			if err != nil {
				b.Fatal(err)
			}
			if errs := broker.AckAll(ctx, ds); errs != nil {
				b.Fatal(errs)
			}
			got += len(ds)
		}
	}, func(n int) { rawConsume(b, cons, n, nil) }, func(n int) { rawConsume(b, fcons, n, fjs.Conn()) })
}

// rawConsume fetches and acks n messages with nats.go, as the benchmarks'
// raw side; with nc, it flushes nc after each batch's acks.
func rawConsume(b *testing.B, cons jetstream.Consumer, n int, nc *natsgo.Conn) {
	for got := 0; got < n; {
		batch, err := cons.Fetch(min(benchBatch, n-got), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for m := range batch.Messages() {
			if _, err := m.Metadata(); err != nil {
				b.Fatal(err)
			}
			if err := m.Ack(); err != nil {
				b.Fatal(err)
			}
			got++
		}
		if err := batch.Error(); err != nil {
			b.Fatal(err)
		}
		if nc != nil {
			if err := nc.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
