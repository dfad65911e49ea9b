package gcppubsub_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/gcppubsub"
	"github.com/wary-go/wary/internal/benchpair"
)

// The benchmarks compare wary with the raw SDK client doing the same work
// on pstest (served by psemu, in this process): publish in batches of ten
// (one Publish with an ordering key and one attribute per message) and
// receive and ack (Pull of up to ten, then one Acknowledge of those). The
// two alternate in rounds inside one benchmark, so that both see the same
// load on the machine; b.N counts messages per side. Each reports
// wary-msgs/s, sdk-msgs/s and wary/sdk in percent.
//
//	go test -run '^$' -bench . -benchtime 2000x ./drivers/gcppubsub/

const (
	benchKeys = 16
	benchBody = 256
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

// benchMessages builds n messages with body, as rawSend builds its own:
// the body once per round, the rest per message.
func benchMessages(body []byte, n int) []*broker.Message {
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: benchID(), Key: "k" + strconv.Itoa(i%benchKeys), Body: body, Headers: broker.Headers{{"h", "v"}}}
	}
	return msgs
}

// rawSend publishes n messages as the raw client would: batches of ten,
// each with an ordering key, its ID and one attribute.
func rawSend(ctx context.Context, b *testing.B, e *testEnv, topic string, n int) {
	body := benchBodyBytes()
	for i := 0; i < n; i += 10 {
		pms := make([]*pubsubpb.PubsubMessage, 0, 10)
		for j := i; j < min(i+10, n); j++ {
			pms = append(pms, &pubsubpb.PubsubMessage{Data: body, OrderingKey: "k" + strconv.Itoa(j%benchKeys),
				Attributes: map[string]string{"h": "v", "id": benchID()}})
		}
		if _, err := e.client.TopicAdminClient.Publish(ctx, &pubsubpb.PublishRequest{Topic: topic, Messages: pms}); err != nil {
			b.Fatalf("raw publish: %v", err)
		}
	}
}

func BenchmarkPublish(b *testing.B) {
	e := newTestEnv(b)
	ctx := context.Background()
	// Topics without subscriptions: pstest's delivery loop walks every
	// undelivered message of a subscription each 10 ms, which would
	// bound both sides by the backlog, not the clients. The wary topic
	// sends ordering keys as the raw side does (OrderingOn).
	w := e.createTopic(b, "bench", 0)
	r := e.createTopic(b, "bench", 0)
	topic, err := gcppubsub.OpenTopic(ctx, e.client, w, &gcppubsub.TopicOptions{Ordering: gcppubsub.OrderingOn})
	if err != nil {
		b.Fatal(err)
	}
	defer topic.Close()
	benchpair.Run(b, 100, func(n int) {
		body := benchBodyBytes()
		for i := 0; i < n; i += 10 {
			if err := topic.Publish(ctx, benchMessages(body, min(10, n-i))...); err != nil {
				b.Fatal(err)
			}
		}
	}, func(n int) { rawSend(ctx, b, e, r, n) })
}

func BenchmarkConsume(b *testing.B) {
	e := newTestEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Without ordering: pstest hands out one message per ordering key at
	// a time, which would bound both sides by the keys, not the clients.
	w := e.create(b, subSpec{AckDeadline: 60 * time.Second})
	r := e.create(b, subSpec{AckDeadline: 60 * time.Second})
	rawSend(ctx, b, e, w.Topic, b.N)
	rawSend(ctx, b, e, r.Topic, b.N)
	sub, err := gcppubsub.OpenSubscription(ctx, e.client, w.Sub, &gcppubsub.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	benchpair.Run(b, 100, func(n int) {
		for got := 0; got < n; {
			ds, err := sub.Receive(ctx, min(10, n-got))
			if err != nil {
				b.Fatal(err)
			}
			for _, err := range broker.AckAll(ctx, ds) {
				if err != nil {
					b.Fatal(err)
				}
			}
			got += len(ds)
		}
	}, func(n int) {
		for got := 0; got < n; {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			res, err := e.client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: r.Sub, MaxMessages: int32(min(10, n-got))})
			cancel()
			if err != nil {
				continue // an empty wait
			}
			ids := make([]string, 0, len(res.ReceivedMessages))
			for _, m := range res.ReceivedMessages {
				ids = append(ids, m.AckId)
			}
			if len(ids) > 0 {
				if err := e.client.SubscriptionAdminClient.Acknowledge(context.Background(), &pubsubpb.AcknowledgeRequest{Subscription: r.Sub, AckIds: ids}); err != nil {
					b.Fatal(err)
				}
			}
			got += len(ids)
		}
	})
}
