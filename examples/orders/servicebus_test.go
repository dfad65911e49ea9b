//go:build servicebus

package main

import (
	"testing"
	"time"

	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestServiceBusEmulator runs the example on a Service Bus queue of the
// emulator, through the plain URL a user would give: the driver reads the
// queue's properties through the emulator's administration API, which
// WARY_SERVICEBUS_ADMIN_ENDPOINT names.
func TestServiceBusEmulator(t *testing.T) {
	serviceBusQueue(t)
	run(t, Config{Broker: serviceBusURL})
}

const serviceBusURL = "servicebus://orders"

// TestServiceBusEntities runs the example on the other entities the
// Service Bus guide's emulator command creates: a session queue and a
// topic subscription without sessions. Neither delays a Nack (the driver
// declares NackDelay false), so the example and the inbox must do without.
func TestServiceBusEntities(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topology sbemu.Topology
		cfg      Config
	}{
		{"session queue", sbemu.Topology{Queues: []sbemu.Queue{{Name: "orders-s", RequiresSession: true, LockDuration: 5 * time.Second, MaxDeliveryCount: 10}}},
			Config{Broker: "servicebus://orders-s"}},
		{"subscription", sbemu.Topology{Topics: []sbemu.Topic{{Name: "events", Subscriptions: []sbemu.Subscription{{Name: "audit", LockDuration: 5 * time.Second, MaxDeliveryCount: 10}}}}},
			Config{Broker: "servicebus://events", Subscription: "servicebus://events/Subscriptions/audit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu := sbemu.Start(t, tc.topology)
			t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString)
			t.Setenv(servicebus.EnvAdminEndpoint, emu.AdminEndpoint)
			run(t, tc.cfg)
		})
	}
}

// serviceBusQueue starts the emulator with the queue orders and points the
// driver at it.
func serviceBusQueue(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "orders", LockDuration: 5 * time.Second, MaxDeliveryCount: 10}}})
	t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString)
	t.Setenv(servicebus.EnvAdminEndpoint, emu.AdminEndpoint)
}

// TestTelemetryServiceBus is TestServiceBusEmulator with OpenTelemetry on
// (see runTraced): the trace context travels in application properties.
func TestTelemetryServiceBus(t *testing.T) {
	serviceBusQueue(t)
	runTraced(t, Config{Broker: serviceBusURL}, "servicebus", "orders")
}
