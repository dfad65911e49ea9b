package servicebus_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
)

// Publish and consume through wary and through the raw SDK, on the same
// emulator in one run (go test -run x -bench . ./drivers/servicebus/).
// The emulator is the bottleneck; the point is the driver's overhead.
func BenchmarkServiceBus(b *testing.B) {
	e := newEnv(b)
	body := make([]byte, 256)
	ctx := context.Background()
	b.Run("publish/wary", func(b *testing.B) {
		q := e.createQueue(b, entityConfig{})
		topic, err := servicebus.OpenTopic(e.client, q, &servicebus.TopicOptions{Admin: e.admin})
		if err != nil {
			b.Fatal(err)
		}
		defer topic.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := topic.Publish(ctx, &broker.Message{Body: body}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("publish/sdk", func(b *testing.B) {
		q := e.createQueue(b, entityConfig{})
		sender, err := e.client.NewSender(q, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer sender.Close(ctx)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			id := broker.NewID()
			if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: body}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	fill := func(b *testing.B, q string) {
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
				if err := batch.AddMessage(&azservicebus.Message{Body: body}, nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("consume/wary", func(b *testing.B) {
		q := e.createQueue(b, entityConfig{})
		fill(b, q)
		sub, err := servicebus.OpenSubscription(e.client, q, &servicebus.SubscriptionOptions{Admin: e.admin})
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		b.ResetTimer()
		for got := 0; got < b.N; {
			ds, err := sub.Receive(ctx, min(100, b.N-got))
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
	})
	b.Run("consume/sdk", func(b *testing.B) {
		q := e.createQueue(b, entityConfig{})
		fill(b, q)
		r, err := e.client.NewReceiverForQueue(q, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close(ctx)
		b.ResetTimer()
		for got := 0; got < b.N; {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			msgs, err := r.ReceiveMessages(rctx, min(100, b.N-got), nil)
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
