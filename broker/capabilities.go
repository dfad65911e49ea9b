package broker

import (
	"time"

	"github.com/wary-go/wary/broker/driver"
)

// TopicCapabilities is what a broker promises a publisher on a topic (keys,
// dedup, sizes and batches), as data; see driver.TopicCapabilities for each
// field. The conformance suite proves every declared field against the
// live broker.
type TopicCapabilities = driver.TopicCapabilities

// SubscriptionCapabilities is what a broker promises a consumer of a
// subscription (order as delivered, acks, the delivery count and limit,
// dead letters, locks, nack delays, the redelivery horizon), as data; see
// driver.SubscriptionCapabilities for each field. The conformance suite
// proves every declared field against the live broker.
type SubscriptionCapabilities = driver.SubscriptionCapabilities

// Re-exported enumerations, so users need not import broker/driver.
type (
	OrderingScope = driver.OrderingScope
	DedupScope    = driver.DedupScope
	AckModel      = driver.AckModel
	LimitMode     = driver.LimitMode
)

// Ordering scopes, dedup scopes, ack models and limit modes.
const (
	OrderNone         = driver.OrderNone
	OrderQueue        = driver.OrderQueue
	OrderPartition    = driver.OrderPartition
	OrderMessageGroup = driver.OrderMessageGroup
	OrderSession      = driver.OrderSession

	DedupNone         = driver.DedupNone
	DedupQueue        = driver.DedupQueue
	DedupMessageGroup = driver.DedupMessageGroup

	AckPerMessage = driver.AckPerMessage
	AckCumulative = driver.AckCumulative

	HorizonUnknown   = driver.HorizonUnknown
	HorizonUnbounded = driver.HorizonUnbounded

	LimitNone     = driver.LimitNone
	LimitNative   = driver.LimitNative
	LimitEmulated = driver.LimitEmulated
)

// HeaderDeadLetterReason is the header that carries, on a message received
// from a dead-letter queue, the reason it was dead-lettered.
const HeaderDeadLetterReason = driver.HeaderDeadLetterReason

// LockNone, as SubscriptionCapabilities.LockTimeout, says that the broker
// does not lock a delivery: an unsettled message is visible again at once.
// Run refuses such a subscription.
const LockNone = driver.LockNone

// HorizonString renders a redelivery horizon: "unknown", "unbounded" or
// the duration.
func HorizonString(h time.Duration) string { return driver.HorizonString(h) }
