package cli_test

import (
	"testing"
	"time"

	"github.com/wary-go/wary/conformance/emulators/sbemu"
	"github.com/wary-go/wary/drivers/servicebus"
)

// TestServiceBusDLQ: the dead-letter sub-queue of a Service Bus queue
// (our emulator) is listed, replayed and discarded through servicebus://
// URLs, the namespace in WARY_SERVICEBUS_CONNECTION_STRING.
func TestServiceBusDLQ(t *testing.T) {
	name := unique("orders")
	// On our emulator, a message read from a dead-letter queue and
	// abandoned (what list does to put it back) came back only when its
	// lock expired (measured: 30s with a 30s lock): a short lock lets the
	// next command read it.
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: name, LockDuration: 2 * time.Second, MaxDeliveryCount: 5}}})
	if emu.Real {
		t.Skip("runs on the emulator, whose entities it declares")
	}
	t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString) // the driver reads it
	q := "?read_entity=false&lock_duration=2s&max_delivery_count=5"
	top := mustOpenTopic(t, "servicebus://"+name+q)
	sub := mustOpenSub(t, "servicebus://"+name+q)
	dlqWalkthrough(t, newWary(t), top, "servicebus://"+name+q, sub, "servicebus://"+name+"/$DeadLetterQueue"+q, "10s")
}
