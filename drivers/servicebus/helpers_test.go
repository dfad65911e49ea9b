package servicebus_test

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// env is one emulator (or the namespace of WARY_SERVICEBUS_CONNECTION_STRING)
// with a client and an administration client.
type env struct {
	emu    *sbemu.Emulator
	client *azservicebus.Client
	admin  *admin.Client
}

func newEnv(t conformance.T) *env {
	t.Helper()
	emu := sbemu.Start(t, sbemu.Topology{MaxMessageSize: 1 << 20})
	e := &env{emu: emu, client: emu.NewClient(t), admin: emu.AdminClient(t)}
	// open the client's connection now, so that its goroutines exist
	// before a conformance run starts counting leaks
	q := e.createQueue(t, sbemu.Entity{})
	sender, err := e.client.NewSender(q, nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("warm up")}, nil); err != nil {
		t.Fatalf("warm-up send: %v", err)
	}
	_ = sender.Close(ctx)
	return e
}

// createQueue creates a fresh queue, deleted when the test ends.
func (e *env) createQueue(t conformance.T, c sbemu.Entity) string {
	t.Helper()
	return sbemu.CreateQueue(t, e.admin, c)
}

// createSubscription creates a fresh topic and one subscription; it
// returns the topic and the subscription's path.
func (e *env) createSubscription(t conformance.T, c sbemu.Entity) (topic, path string) {
	t.Helper()
	return sbemu.CreateSubscription(t, e.admin, c)
}

// openTopic opens the driver's topic on a queue the test created, closed
// when the test ends.
func (e *env) openTopic(t conformance.T, q string) *broker.Topic {
	t.Helper()
	topic, err := servicebus.OpenTopic(t.Context(), e.client, q, &servicebus.TopicOptions{Admin: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	return topic
}
