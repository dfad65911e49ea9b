package sqsfifo

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/wary-go/wary/conformance/capsdoc"
	"github.com/wary-go/wary/drivers/memory"
)

// TestMemoryProfile: the memory broker's sqsfifo profile, configured as a
// FIFO queue with a redrive policy is (visibility timeout, maxReceiveCount,
// dedup window and scope, size, retention), promises exactly what the
// driver declares for that queue, on both sides.
func TestMemoryProfile(t *testing.T) {
	for _, q := range []struct {
		vis, maxSize, retention, limit int
		dedup                          time.Duration
		scope                          string
	}{
		{30, 262144, 345600, 5, DefaultDedupWindow, "queue"},
		{5, 1 << 20, 3600, 1, time.Minute, "messageGroup"},
	} {
		a := map[string]string{
			"VisibilityTimeout":      strconv.Itoa(q.vis),
			"MaximumMessageSize":     strconv.Itoa(q.maxSize),
			"MessageRetentionPeriod": strconv.Itoa(q.retention),
			"RedrivePolicy":          `{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:orders-dlq.fifo","maxReceiveCount":` + strconv.Itoa(q.limit) + `}`,
			"DeduplicationScope":     q.scope,
		}
		topic, sub, _, err := capsFromAttributes(a, q.dedup)
		if err != nil {
			t.Fatal(err)
		}
		cfg := memory.TopicConfig{
			Profile:          memory.SQSFIFO,
			LockTimeout:      time.Duration(q.vis) * time.Second,
			DeliveryLimit:    q.limit,
			DedupWindow:      q.dedup,
			DedupScope:       topic.DedupScope,
			MaxMessageSize:   q.maxSize - attrReserve,
			MessageRetention: time.Duration(q.retention) * time.Second,
		}
		capsdoc.Same(t,
			capsdoc.Column{Name: "memory " + cfg.String(), Topic: cfg.TopicCapabilities(), Sub: cfg.SubscriptionCapabilities()},
			capsdoc.Column{Name: fmt.Sprintf("a FIFO queue with %v", a), Topic: topic, Sub: sub})
	}
}
