package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/internal/idemtest"
)

// TestRunGroupedVersionsRabbit runs idemtest.RunGroupedVersions on a
// RabbitMQ quorum queue without single active consumer, where competing
// inboxes with shared transactions and version checks were found
// deadlocking on shared aggregates (issue 43): four consumers receive in
// parallel, and no delivery may be nacked.
func TestRunGroupedVersionsRabbit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := rabbitConn(ctx, t, nil)
	t.Cleanup(func() { c.Close() })
	name := sharedQueue(t, fmt.Sprintf("wary-test.grouped.%d", time.Now().UnixNano()))
	topic, err := rabbit.OpenTopic(ctx, c, rabbit.Topology{Exchange: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	idemtest.RunGroupedVersions(t, newDB, idemtest.Broker{Topic: topic, Subscribe: func(t testing.TB) *broker.Subscription {
		sub, err := rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: name, DeliveryLimit: rabbit.NoDeliveryLimit}, &rabbit.SubscriptionOptions{Management: rabbit.ManagementOff})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		return sub
	}})
}

// sharedQueue declares, with amqp091 directly, a fanout exchange and a
// quorum queue bound to it, both named name, without single active
// consumer (its consumers receive in parallel) and without a delivery
// limit; deleted at cleanup.
func sharedQueue(t *testing.T, name string) string {
	ch := amqpChannel(t)
	if err := ch.ExchangeDeclare(name, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	args := amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, "x-delivery-limit": -1}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(name, "", name, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(name, false, false, false)
		_ = ch.ExchangeDelete(name, false, false)
	})
	return name
}
