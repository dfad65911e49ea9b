package sbemu

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/conformance"
)

var nameSeq atomic.Int64

// UniqueName returns a fresh entity name (letters, digits and dashes).
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

// isoDuration writes d as the administration API wants it.
func isoDuration(d time.Duration) *string {
	s := "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
	return &s
}

func ptr[T any](v T) *T { return &v }

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

func (c Entity) queueProps() *admin.QueueProperties {
	p := &admin.QueueProperties{RequiresSession: ptr(c.Sessions)}
	if c.Lock > 0 {
		p.LockDuration = isoDuration(c.Lock)
	}
	if c.DeliveryLimit > 0 {
		p.MaxDeliveryCount = ptr(int32(c.DeliveryLimit))
	}
	if c.Dedup > 0 {
		p.RequiresDuplicateDetection = ptr(true)
		p.DuplicateDetectionHistoryTimeWindow = isoDuration(c.Dedup)
	}
	return p
}

// CreateQueue creates a fresh queue through adm, deleted when the test
// ends, and returns its name.
func CreateQueue(t conformance.T, adm *admin.Client, c Entity) string {
	t.Helper()
	name := UniqueName("q")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: c.queueProps()}); err != nil {
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
// adm, deleted when the test ends; it returns the topic and the
// subscription's path.
func CreateSubscription(t conformance.T, adm *admin.Client, c Entity) (topic, path string) {
	t.Helper()
	topic = UniqueName("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := &admin.TopicProperties{}
	if c.Dedup > 0 {
		tp.RequiresDuplicateDetection = ptr(true)
		tp.DuplicateDetectionHistoryTimeWindow = isoDuration(c.Dedup)
	}
	if _, err := adm.CreateTopic(ctx, topic, &admin.CreateTopicOptions{Properties: tp}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	qp := c.queueProps()
	sp := &admin.SubscriptionProperties{RequiresSession: qp.RequiresSession, LockDuration: qp.LockDuration, MaxDeliveryCount: qp.MaxDeliveryCount}
	if _, err := adm.CreateSubscription(ctx, topic, "sub", &admin.CreateSubscriptionOptions{Properties: sp}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopic(ctx, topic, nil)
	})
	return topic, topic + "/Subscriptions/sub"
}
