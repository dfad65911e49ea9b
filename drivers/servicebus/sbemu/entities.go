package sbemu

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
)

var nameSeq atomic.Int64

// UniqueName returns a fresh entity name (letters, digits and dashes).
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

// Entity is what CreateQueue and CreateSubscription make at run time,
// through the administration API (zero fields: the entity's defaults).
type Entity struct {
	// Sessions makes a session entity (RequiresSession).
	Sessions bool
	// Lock is the LockDuration.
	Lock time.Duration
	// DeliveryLimit is the MaxDeliveryCount.
	DeliveryLimit int
	// Dedup turns on duplicate detection with this window.
	Dedup time.Duration
}

// props are c's properties as the driver's Create functions take them.
func (c Entity) props() (servicebus.TopicProperties, servicebus.SubscriptionProperties) {
	return servicebus.TopicProperties{RequiresSession: c.Sessions, DuplicateDetectionWindow: c.Dedup},
		servicebus.SubscriptionProperties{RequiresSession: c.Sessions, LockDuration: c.Lock, MaxDeliveryCount: c.DeliveryLimit}
}

// CreateQueue creates a fresh queue through adm (servicebus.CreateQueue),
// deleted when the test ends, and returns its name.
func CreateQueue(t conformance.T, adm *admin.Client, c Entity) string {
	t.Helper()
	name := UniqueName("q")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, sp := c.props()
	if err := servicebus.CreateQueue(ctx, adm, name, tp, sp); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteQueue(ctx, name, nil)
	})
	return name
}

// CreateSubscription creates a fresh topic and one subscription through
// adm (servicebus.CreateTopic and CreateSubscription), deleted when the
// test ends; it returns the topic and the subscription's path.
func CreateSubscription(t conformance.T, adm *admin.Client, c Entity) (topic, path string) {
	t.Helper()
	topic = UniqueName("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, sp := c.props()
	if err := servicebus.CreateTopic(ctx, adm, topic, tp); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopic(ctx, topic, nil)
	})
	if err := servicebus.CreateSubscription(ctx, adm, topic, "sub", sp); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	return topic, topic + "/Subscriptions/sub"
}
