package gcppubsub

import (
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// Limits of Pub/Sub that no topic or subscription setting reports
// (https://cloud.google.com/pubsub/quotas#resource_limits).
const (
	// MaxPublishBytes is the most a Publish request may carry: messages'
	// data, attributes and ordering keys (10 MB).
	MaxPublishBytes = 10_000_000
	// MaxBatchSize is the most messages of one Publish request.
	MaxBatchSize = 1000
	// MaxAttributes is the most attributes of one message.
	MaxAttributes = 100
	// MaxAttributeKey and MaxAttributeValue are the most bytes of an
	// attribute's name and of its value.
	MaxAttributeKey   = 256
	MaxAttributeValue = 1024
	// MaxOrderingKey is the most bytes of an ordering key.
	MaxOrderingKey = 1024
	// MaxAckDeadline is the longest ack deadline (ModifyAckDeadline).
	MaxAckDeadline = 600 * time.Second
	// DefaultAckDeadline is the ack deadline of a subscription created
	// without one.
	DefaultAckDeadline = 10 * time.Second
	// DefaultMaxDeliveryAttempts is what a dead-letter policy without
	// max_delivery_attempts applies.
	DefaultMaxDeliveryAttempts = 5
	// DefaultRetention is the message retention of a subscription created
	// without one (7 days).
	DefaultRetention = 7 * 24 * time.Hour
	// attrReserve is what the declared MaxMessageSize keeps free, below
	// MaxPublishBytes, for the attributes the driver adds (wary-id,
	// wary-key) and Pub/Sub's framing.
	attrReserve = 4096
)

// Attributes the driver sets and reads.
const (
	// AttrID holds the message's wary ID (Pub/Sub assigns its own message
	// ID on publish).
	AttrID = "wary-id"
	// AttrKey holds the message's key when the topic does not send it as
	// the ordering key (no attached subscription orders).
	AttrKey = "wary-key"
	// AttrDeadLetterReason holds the reason given to DeadLetter, on the
	// copy sent to the dead-letter topic.
	AttrDeadLetterReason = driver.HeaderDeadLetterReason
)

// fullName returns projects/PROJECT/KIND/NAME for name, which is either
// that already or a bare name in project.
func fullName(project, kind, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty %s name", strings.TrimSuffix(kind, "s"))
	}
	if strings.HasPrefix(name, "projects/") {
		p := strings.Split(name, "/")
		if len(p) != 4 || p[1] == "" || p[2] != kind || p[3] == "" {
			return "", fmt.Errorf("%q is not a %s name (projects/PROJECT/%s/NAME)", name, strings.TrimSuffix(kind, "s"), kind)
		}
		return name, nil
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("%q is not a %s name (a name, or projects/PROJECT/%s/NAME)", name, strings.TrimSuffix(kind, "s"), kind)
	}
	if project == "" {
		return "", fmt.Errorf("the client has no project for %s %q", strings.TrimSuffix(kind, "s"), name)
	}
	return "projects/" + project + "/" + kind + "/" + name, nil
}

// shortName is the last segment of a full name.
func shortName(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

// Config is what the driver read of a subscription, and what its
// capabilities come from: an As target of a Subscription.
type Config struct {
	// Name is the subscription's full name, Topic its topic's.
	Name, Topic string
	// Ordering: message ordering is enabled.
	Ordering bool
	// ExactlyOnce: exactly-once delivery is enabled; acks are checked.
	ExactlyOnce bool
	// AckDeadline is the subscription's ack deadline.
	AckDeadline time.Duration
	// DeadLetterTopic is the dead-letter policy's topic ("" without one),
	// MaxDeliveryAttempts its limit.
	DeadLetterTopic     string
	MaxDeliveryAttempts int
	// Retention is how long unacknowledged messages are kept.
	Retention time.Duration
	// RetryPolicy: the subscription's retry policy delays redeliveries
	// (between MinBackoff and MaxBackoff).
	RetryPolicy            bool
	MinBackoff, MaxBackoff time.Duration
	// Filter is the subscription's filter ("" without one).
	Filter string
}

// configOf reads a subscription's settings, with Pub/Sub's defaults for
// those it leaves unset.
func configOf(s *pubsubpb.Subscription) Config {
	c := Config{
		Name:        s.GetName(),
		Topic:       s.GetTopic(),
		Ordering:    s.GetEnableMessageOrdering(),
		ExactlyOnce: s.GetEnableExactlyOnceDelivery(),
		AckDeadline: time.Duration(s.GetAckDeadlineSeconds()) * time.Second,
		Retention:   s.GetMessageRetentionDuration().AsDuration(),
		Filter:      s.GetFilter(),
	}
	if c.AckDeadline <= 0 {
		c.AckDeadline = DefaultAckDeadline
	}
	if s.GetMessageRetentionDuration() == nil {
		c.Retention = DefaultRetention
	}
	if dl := s.GetDeadLetterPolicy(); dl != nil && dl.GetDeadLetterTopic() != "" {
		c.DeadLetterTopic = dl.GetDeadLetterTopic()
		c.MaxDeliveryAttempts = int(dl.GetMaxDeliveryAttempts())
		if c.MaxDeliveryAttempts == 0 {
			c.MaxDeliveryAttempts = DefaultMaxDeliveryAttempts
		}
	}
	if rp := s.GetRetryPolicy(); rp != nil {
		c.RetryPolicy = true
		c.MinBackoff = rp.GetMinimumBackoff().AsDuration()
		c.MaxBackoff = rp.GetMaximumBackoff().AsDuration()
	}
	return c
}

// capabilities derives what the subscription promises a consumer.
func (c Config) capabilities() capability.Subscription {
	caps := capability.Subscription{
		AckModel:          capability.AckPerMessage,
		LockTimeout:       c.AckDeadline,
		LockExtendable:    true,
		NackDelay:         true,
		RedeliveryHorizon: c.Retention,
		Source:            capability.Source{Read: c.describe()},
	}
	if c.Ordering {
		caps.Ordering = capability.OrderMessageGroup
		caps.HeadOfLine = true
	}
	if c.DeadLetterTopic != "" {
		caps.DeliveryCount = true
		caps.DeliveryLimit = c.MaxDeliveryAttempts
		caps.DeliveryLimitMode = capability.LimitNative
		caps.DeadLetter = true
	}
	return caps
}

// describe says, for people, what was read.
func (c Config) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "subscription %s's configuration (GetSubscription): ack deadline %s, retention %s", shortName(c.Name), c.AckDeadline, c.Retention)
	if c.Ordering {
		b.WriteString(", message ordering on")
	} else {
		b.WriteString(", message ordering off")
	}
	if c.ExactlyOnce {
		b.WriteString(", exactly-once delivery on (acks checked)")
	} else {
		b.WriteString(", exactly-once delivery off")
	}
	if c.DeadLetterTopic != "" {
		fmt.Fprintf(&b, ", dead-letter topic %s after %d delivery attempts", shortName(c.DeadLetterTopic), c.MaxDeliveryAttempts)
	} else {
		b.WriteString(", no dead-letter policy")
	}
	if c.RetryPolicy {
		fmt.Fprintf(&b, ", retry policy backoff %s to %s", c.MinBackoff, c.MaxBackoff)
	}
	if c.Filter != "" {
		b.WriteString(", a filter")
	}
	return b.String()
}

// topicCapabilities derives what a topic promises a publisher. ordering
// says whether the message key is sent as the ordering key.
func topicCapabilities(ordering bool) capability.Topic {
	caps := capability.Topic{
		DedupScope:     capability.DedupNone,
		MaxMessageSize: MaxPublishBytes - attrReserve,
		MaxBatchSize:   MaxBatchSize,
	}
	if ordering {
		caps.OrderingKey = "Message.Key as the Pub/Sub ordering key"
	}
	return caps
}
