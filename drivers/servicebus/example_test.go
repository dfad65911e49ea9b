package servicebus_test

import (
	"context"
	"log"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
)

// Publishing to a session queue and handling its sessions, with the
// entity's properties read through the administration client.
func Example() {
	ctx := context.Background()
	cs := os.Getenv(servicebus.ConnectionStringEnv)
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		log.Fatal(err)
	}
	ac, err := admin.NewClientFromConnectionString(cs, nil)
	if err != nil {
		log.Fatal(err)
	}
	orders, err := servicebus.OpenTopic(ctx, client, "orders", &servicebus.TopicOptions{Admin: ac})
	if err != nil {
		log.Fatal(err)
	}
	defer orders.Close()
	// on a session queue the key is the SessionId: this order's events
	// are handled in order, one at a time
	if err := orders.Publish(ctx, &broker.Message{ID: "order-42-created", Key: "order-42", Body: []byte(`{}`)}); err != nil {
		log.Fatal(err)
	}
	sub, err := servicebus.OpenSubscription(ctx, client, "orders", &servicebus.SubscriptionOptions{Admin: ac, MaxSessions: 16})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	err = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
		log.Printf("%s: %s", d.Message.Key, d.Message.Body)
		return nil // Run completes the message
	}, &broker.RunOptions{Concurrency: 16, PerKey: true})
	if err != nil {
		log.Fatal(err)
	}
}

// Opening by URL: the connection string comes from
// WARY_SERVICEBUS_CONNECTION_STRING, never from the URL.
func Example_uRL() {
	ctx := context.Background()
	sub, err := broker.OpenSubscription(ctx, "servicebus://orders/Subscriptions/billing?max_sessions=8")
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	// The dead letters of the subscription, from its own URL.
	dlq, err := broker.OpenDeadLetters(ctx, "servicebus://orders/Subscriptions/billing")
	if err != nil {
		log.Fatal(err)
	}
	defer dlq.Close()
}
