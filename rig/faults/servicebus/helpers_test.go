package servicebus_test

import (
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
	return &env{emu: emu, client: emu.NewClient(t), admin: emu.AdminClient(t)}
}

// createQueue creates a fresh queue, deleted when the test ends.
func (e *env) createQueue(t conformance.T, c sbemu.Entity) string {
	t.Helper()
	return sbemu.CreateQueue(t, e.admin, c)
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
