package servicebus_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/internal/benchpair"
)

// The benchmarks compare wary with the raw azservicebus SDK doing the same
// work on the emulator: publish one message at a time (256-byte body, a
// message ID) and consume (receive up to 100, complete each). The two
// alternate in rounds of 100 messages inside one benchmark, so that both
// see the same load on the machine; b.N counts messages per side. Each
// reports wary-msgs/s and sdk-msgs/s over the whole run, wary/sdk in
// percent, the ratio of the per-round medians, and client CPU per message.
//
//	go test -run '^$' -bench . -benchtime 2000x -count 5 ./drivers/servicebus/
//
// The emulator runs on the same cores, so it bounds both rates; the point
// is the driver's overhead.

const benchRound = 100

var benchBody = make([]byte, 256)

func BenchmarkPublish(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	topic, err := servicebus.OpenTopic(ctx, e.client, e.createQueue(b, sbemu.Entity{}), &servicebus.TopicOptions{Admin: e.admin})
	if err != nil {
		b.Fatal(err)
	}
	defer topic.Close()
	sender, err := e.client.NewSender(e.createQueue(b, sbemu.Entity{}), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sender.Close(ctx)
	benchpair.Run(b, benchRound, func(n int) {
		for range n {
			if err := topic.Publish(ctx, &broker.Message{Body: benchBody}); err != nil {
				b.Fatal(err)
			}
		}
	}, func(n int) {
		for range n {
			id := broker.NewID()
			if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: benchBody}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkConsume(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	fill := func(q string) {
		sender, err := e.client.NewSender(q, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer sender.Close(ctx)
		for i := 0; i < b.N; {
			batch, err := sender.NewMessageBatch(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			for ; i < b.N && batch.NumMessages() < 100; i++ {
				id := broker.NewID()
				if err := batch.AddMessage(&azservicebus.Message{MessageID: &id, Body: benchBody}, nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	wq, rq := e.createQueue(b, sbemu.Entity{}), e.createQueue(b, sbemu.Entity{})
	fill(wq)
	fill(rq)
	sub, err := servicebus.OpenSubscription(ctx, e.client, wq, &servicebus.SubscriptionOptions{Admin: e.admin})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	r, err := e.client.NewReceiverForQueue(rq, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	benchpair.Run(b, benchRound, func(n int) {
		for got := 0; got < n; {
			ds, err := sub.Receive(ctx, n-got)
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range ds {
				if err := d.Ack(ctx); err != nil {
					b.Fatal(err)
				}
			}
			got += len(ds)
		}
	}, func(n int) {
		for got := 0; got < n; {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			msgs, err := r.ReceiveMessages(rctx, n-got, nil)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range msgs {
				if err := r.CompleteMessage(ctx, m, nil); err != nil {
					b.Fatal(err)
				}
			}
			got += len(msgs)
		}
	})
}
