package servicebus

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// Service Bus defaults, used for what neither the administration client
// nor entityProps says.
const (
	DefaultLockDuration     = 60 * time.Second
	DefaultMaxDeliveryCount = 10
	// DefaultSettleTimeout is this driver's default of
	// broker.SubscriptionOptions.SettleTimeout, which also bounds its
	// settle, renew and schedule calls.
	DefaultSettleTimeout = 10 * time.Second
	// DefaultMaxMessageSize is the Standard tier's limit (256 KiB).
	DefaultMaxMessageSize = 256 << 10
)

// sizeHeadroom is what the driver keeps, of the entity's size limit, for
// the AMQP encoding around body, ID, key and headers (properties, message
// annotations, the application-properties map's own framing). A message
// that still does not fit is refused as too large before sending.
const sizeHeadroom = 2048

// TopicProperties describes the entity a topic sends to, a queue or a
// topic, for what it promises a publisher (capability.Topic). With an
// administration client (TopicOptions.Admin) the driver reads them from
// the namespace and ignores these, but for RequiresSession of a topic's
// subscriptions; without one it believes these. Zero fields take the
// service's defaults.
type TopicProperties struct {
	// RequiresSession: the queue, or the topic's subscriptions, require
	// sessions. Message.Key is then the SessionId, required on every
	// message.
	RequiresSession bool
	// DuplicateDetectionWindow is the duplicate detection history window of
	// the queue or topic (0: no duplicate detection).
	DuplicateDetectionWindow time.Duration
	// MaxMessageSize in bytes (default 256 KiB, the Standard tier).
	MaxMessageSize int
}

// SubscriptionProperties describes the entity a subscription receives
// from, a queue or a topic subscription, for what it promises a consumer
// (capability.Subscription). With an administration client
// (SubscriptionOptions.Admin) the driver reads them from the namespace and
// ignores these; without one it believes these. Zero fields take the
// service's defaults.
type SubscriptionProperties struct {
	// RequiresSession: the queue or subscription requires sessions: order
	// and head-of-line blocking per session.
	RequiresSession bool
	// LockDuration is the peek-lock duration (default 60s).
	LockDuration time.Duration
	// MaxDeliveryCount (default 10).
	MaxDeliveryCount int
	// DefaultMessageTimeToLive bounds how long a message lives, and so the
	// redelivery horizon (0: unknown; capability.HorizonUnbounded: messages
	// never expire, the service's default).
	DefaultMessageTimeToLive time.Duration
}

// entityProps is what the driver knows of an entity, from either side's
// properties or the administration client.
type entityProps struct {
	RequiresSession          bool
	LockDuration             time.Duration
	MaxDeliveryCount         int
	DuplicateDetectionWindow time.Duration
	DefaultMessageTimeToLive time.Duration
	MaxMessageSize           int
}

func (p TopicProperties) entity() entityProps {
	return entityProps{RequiresSession: p.RequiresSession, DuplicateDetectionWindow: p.DuplicateDetectionWindow, MaxMessageSize: p.MaxMessageSize}
}

func (p SubscriptionProperties) entity() entityProps {
	return entityProps{RequiresSession: p.RequiresSession, LockDuration: p.LockDuration, MaxDeliveryCount: p.MaxDeliveryCount, DefaultMessageTimeToLive: p.DefaultMessageTimeToLive}
}

func (p entityProps) withDefaults() entityProps {
	if p.LockDuration <= 0 {
		p.LockDuration = DefaultLockDuration
	}
	if p.MaxDeliveryCount <= 0 {
		p.MaxDeliveryCount = DefaultMaxDeliveryCount
	}
	if p.MaxMessageSize <= 0 {
		p.MaxMessageSize = DefaultMaxMessageSize
	}
	return p
}

func (p entityProps) validate() error {
	if p.LockDuration < 0 || p.MaxDeliveryCount < 0 || p.DuplicateDetectionWindow < 0 || p.DefaultMessageTimeToLive < 0 || p.MaxMessageSize < 0 {
		return driver.Invalidf("servicebus: negative entity property")
	}
	if p.MaxMessageSize > 0 && p.MaxMessageSize <= sizeHeadroom {
		return driver.Invalidf("servicebus: TopicProperties.MaxMessageSize %d is too small", p.MaxMessageSize)
	}
	return nil
}

// topicCaps derives what the entity promises a publisher.
func (p entityProps) topicCaps() capability.Topic {
	c := capability.Topic{MaxMessageSize: p.MaxMessageSize - sizeHeadroom}
	if p.RequiresSession {
		c.OrderingKey = "SessionId"
		c.KeyRequired = true
	}
	if p.DuplicateDetectionWindow > 0 {
		c.DedupWindow = p.DuplicateDetectionWindow
		c.DedupScope = capability.DedupQueue
	}
	return c
}

// capabilities derives what the entity promises a consumer. nackDelay:
// Nack(delay) is served by scheduling a copy (queues without sessions).
func (p entityProps) capabilities(nackDelay bool) capability.Subscription {
	c := capability.Subscription{
		Ordering:          capability.OrderNone,
		AckModel:          capability.AckPerMessage,
		DeliveryCount:     true,
		DeliveryLimit:     p.MaxDeliveryCount,
		DeliveryLimitMode: capability.LimitNative,
		DeadLetter:        true,
		LockTimeout:       p.LockDuration,
		LockExtendable:    true,
		NackDelay:         nackDelay,
		RedeliveryHorizon: p.DefaultMessageTimeToLive,
	}
	if p.RequiresSession {
		c.Ordering = capability.OrderSession
		c.HeadOfLine = true
	}
	return c
}

// readQueue, readTopic and readSubscription fill entityProps from the
// administration client. A missing entity is ErrNotFound; an API that does
// not answer, an *EntityReadError. A MaxMessageSizeInKilobytes the API
// leaves out is the Standard tier's fixed limit, DefaultMaxMessageSize.
func readQueue(ctx context.Context, ac *admin.Client, name string) (entityProps, error) {
	q, err := ac.GetQueue(ctx, name, nil)
	if err != nil {
		return entityProps{}, readError("queue", name, err)
	}
	if q == nil {
		return entityProps{}, notFound("queue", name)
	}
	p := q.QueueProperties
	if p.LockDuration == nil && p.MaxDeliveryCount == nil {
		// the administration API answers a topic's name with the topic's
		// entry, which the SDK reads as a queue without properties
		return entityProps{}, notFound("queue", name)
	}
	var e entityProps
	var errs []error
	e.RequiresSession = deref(p.RequiresSession)
	e.LockDuration = durationOf(p.LockDuration, &errs)
	e.MaxDeliveryCount = int(deref(p.MaxDeliveryCount))
	if deref(p.RequiresDuplicateDetection) {
		e.DuplicateDetectionWindow = durationOf(p.DuplicateDetectionHistoryTimeWindow, &errs)
	}
	e.DefaultMessageTimeToLive = durationOf(p.DefaultMessageTimeToLive, &errs)
	if p.MaxMessageSizeInKilobytes != nil {
		e.MaxMessageSize = int(*p.MaxMessageSizeInKilobytes) << 10
	}
	return e, firstErr(errs)
}

func readTopic(ctx context.Context, ac *admin.Client, name string) (entityProps, error) {
	t, err := ac.GetTopic(ctx, name, nil)
	if err != nil {
		return entityProps{}, readError("topic", name, err)
	}
	if t == nil {
		return entityProps{}, notFound("topic", name)
	}
	p := t.TopicProperties
	var e entityProps
	var errs []error
	if deref(p.RequiresDuplicateDetection) {
		e.DuplicateDetectionWindow = durationOf(p.DuplicateDetectionHistoryTimeWindow, &errs)
	}
	e.DefaultMessageTimeToLive = durationOf(p.DefaultMessageTimeToLive, &errs)
	if p.MaxMessageSizeInKilobytes != nil {
		e.MaxMessageSize = int(*p.MaxMessageSizeInKilobytes) << 10
	}
	return e, firstErr(errs)
}

// readSubscription reads the subscription and its topic (duplicate
// detection and size are the topic's; the effective TTL is the smaller).
func readSubscription(ctx context.Context, ac *admin.Client, topicName, sub string) (entityProps, error) {
	e, err := readTopic(ctx, ac, topicName)
	if err != nil {
		return e, err
	}
	s, err := ac.GetSubscription(ctx, topicName, sub, nil)
	if err != nil {
		return e, readError("subscription", topicName+"/Subscriptions/"+sub, err)
	}
	if s == nil {
		return e, notFound("subscription", topicName+"/Subscriptions/"+sub)
	}
	p := s.SubscriptionProperties
	var errs []error
	e.RequiresSession = deref(p.RequiresSession)
	e.LockDuration = durationOf(p.LockDuration, &errs)
	e.MaxDeliveryCount = int(deref(p.MaxDeliveryCount))
	if ttl := durationOf(p.DefaultMessageTimeToLive, &errs); ttl != 0 && (e.DefaultMessageTimeToLive == 0 || ttl < e.DefaultMessageTimeToLive) {
		e.DefaultMessageTimeToLive = ttl
	}
	return e, firstErr(errs)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func firstErr(errs []error) error {
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// maxTimeSpan is .NET's TimeSpan.MaxValue, the service's "never expires".
const maxTimeSpan = "P10675199DT2H48M5.4775807S"

var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// durationOf reads an ISO 8601 duration as the administration API returns
// it; TimeSpan.MaxValue, and anything too long for a time.Duration, is
// capability.HorizonUnbounded. Nil is 0 (unknown).
func durationOf(s *string, errs *[]error) time.Duration {
	if s == nil || *s == "" {
		return 0
	}
	if *s == maxTimeSpan {
		return capability.HorizonUnbounded
	}
	m := isoDuration.FindStringSubmatch(*s)
	if m == nil {
		*errs = append(*errs, fmt.Errorf("servicebus: unreadable duration %q from the administration API", *s))
		return 0
	}
	var secs float64
	for i, unit := range []float64{86400, 3600, 60, 1} {
		if m[i+1] == "" {
			continue
		}
		v, _ := strconv.ParseFloat(m[i+1], 64)
		secs += v * unit
	}
	if secs*float64(time.Second) >= math.MaxInt64 {
		return capability.HorizonUnbounded
	}
	return time.Duration(secs * float64(time.Second))
}

// entityCaps is what a queue (isQueue) or a topic subscription, or the
// dead-letter queue of either, promises a consumer.
func entityCaps(p entityProps, isQueue, dlq bool) capability.Subscription {
	switch {
	case dlq:
		// a dead-letter queue has no sessions, no limit and no dead-letter
		// queue of its own; its messages do not expire
		c := p.capabilities(false)
		c.Ordering, c.HeadOfLine = capability.OrderNone, false
		c.DeliveryLimit, c.DeliveryLimitMode, c.DeadLetter = 0, capability.LimitNone, false
		c.RedeliveryHorizon = capability.HorizonUnbounded
		return c
	case p.RequiresSession:
		// the session lock is renewed while held: a delivery stays with
		// its consumer until settled or the consumer goes away
		c := p.capabilities(false)
		c.LockTimeout, c.LockExtendable = 0, false
		return c
	}
	// a delayed Nack schedules a copy on the queue; on a topic the copy
	// would reach every subscription, so there Nack only abandons
	return p.capabilities(isQueue)
}
