package servicebus_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

var nameSeq atomic.Int64

// uniqueName returns a fresh entity name (letters, digits and dashes).
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

// isoDuration writes d as the administration API wants it.
func isoDuration(d time.Duration) *string {
	s := "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
	return &s
}

func ptr[T any](v T) *T { return &v }

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
	q := e.createQueue(t, entityConfig{})
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

// entityConfig is what a test asks of a fresh entity.
type entityConfig struct {
	sessions      bool
	lock          time.Duration
	deliveryLimit int
	dedup         time.Duration
}

func (c entityConfig) queueProps() *admin.QueueProperties {
	p := &admin.QueueProperties{RequiresSession: ptr(c.sessions)}
	if c.lock > 0 {
		p.LockDuration = isoDuration(c.lock)
	}
	if c.deliveryLimit > 0 {
		p.MaxDeliveryCount = ptr(int32(c.deliveryLimit))
	}
	if c.dedup > 0 {
		p.RequiresDuplicateDetection = ptr(true)
		p.DuplicateDetectionHistoryTimeWindow = isoDuration(c.dedup)
	}
	return p
}

// createQueue creates a fresh queue, deleted when the test ends.
func (e *env) createQueue(t conformance.T, c entityConfig) string {
	t.Helper()
	name := uniqueName("q")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.admin.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: c.queueProps()}); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = e.admin.DeleteQueue(ctx, name, nil)
	})
	return name
}

// createSubscription creates a fresh topic and one subscription; it
// returns the topic and the subscription's path.
func (e *env) createSubscription(t conformance.T, c entityConfig) (topic, path string) {
	t.Helper()
	topic = uniqueName("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := &admin.TopicProperties{}
	if c.dedup > 0 {
		tp.RequiresDuplicateDetection = ptr(true)
		tp.DuplicateDetectionHistoryTimeWindow = isoDuration(c.dedup)
	}
	if _, err := e.admin.CreateTopic(ctx, topic, &admin.CreateTopicOptions{Properties: tp}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	qp := c.queueProps()
	sp := &admin.SubscriptionProperties{RequiresSession: qp.RequiresSession, LockDuration: qp.LockDuration, MaxDeliveryCount: qp.MaxDeliveryCount}
	if _, err := e.admin.CreateSubscription(ctx, topic, "sub", &admin.CreateSubscriptionOptions{Properties: sp}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = e.admin.DeleteTopic(ctx, topic, nil)
	})
	return topic, topic + "/Subscriptions/sub"
}

// openTopic opens the driver's topic on a queue the test created, closed
// when the test ends.
func (e *env) openTopic(t conformance.T, q string) *broker.Topic {
	t.Helper()
	topic, err := servicebus.OpenTopic(e.client, q, &servicebus.TopicOptions{Admin: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	return topic
}
