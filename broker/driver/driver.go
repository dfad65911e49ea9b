// Package driver defines the small interfaces a broker driver implements.
//
// Users never hold these types: they hold the concrete *broker.Topic and
// *broker.Subscription, which wrap a driver and add validation, retry, error
// classification and the handler loop once, for every driver. This package is
// for driver authors, in the way database/sql/driver is for SQL drivers.
//
// Every sentence of the doc comments below is a contract, and the
// conformance suite (package conformance) holds a scenario for each:
//
//   - Drivers do not retry. A failed call returns the broker's (or SDK's)
//     error unchanged; the portable layer decides whether to try again.
//   - Drivers do not keep the slices they are given, nor the messages in them,
//     after a call returns.
//   - Every method is safe for concurrent use by multiple goroutines.
//   - Settling a message that is already settled, or whose lock was lost, is
//     reported through ErrorCode as LockLost, never by a panic.
package driver

import (
	"context"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// AckID identifies one delivery of one message, for settlement. Its dynamic
// type is the driver's own (a receipt handle, a lock token, a delivery tag,
// a partition offset); the portable layer only passes it back.
type AckID any

// Message is a message as drivers see it, in both directions.
type Message struct {
	// ID is the stable logical ID the producer gave the message. Drivers map
	// it to the broker's own field (SQS MessageDeduplicationId, Service Bus
	// MessageId, AMQP message-id, a Kafka header) and return it unchanged.
	ID string
	// Key is the ordering key. Drivers map it to the broker's scope selector
	// (Kafka record key, SQS MessageGroupId, Service Bus SessionId, a
	// routing key). Empty means no key.
	Key string
	// Headers are application headers. Keys and values round-trip unchanged.
	Headers Headers
	// Body is the payload; any bytes, round-tripped unchanged.
	Body []byte

	// The fields below are set by drivers on received messages only.

	// AckID identifies this delivery for SendAcks and friends.
	AckID AckID
	// Attempt is the 1-based delivery count as the broker reports it (or as
	// the driver emulates it, if capability.Subscription.DeliveryCount says so). A
	// driver that cannot know it reports 1 for first deliveries and 2 for
	// known redeliveries.
	Attempt int
	// Redelivered reports whether the broker says it delivered this message
	// before.
	Redelivered bool
	// PublishTime is when the broker accepted the message, if known.
	PublishTime time.Time
	// As, if not nil, lets users reach the SDK's own message type: the
	// portable Message's As calls it. Drivers set it to a pointer they
	// hold anyway (the delivery's AckID, or the SDK's message converted to
	// a type of the driver's with an As method), which costs no
	// allocation, where a closure would cost one per message.
	As Aser
}

// Aser converts a portable value to a driver's own types: i is a pointer
// to one of them, which As sets, reporting whether it could.
type Aser interface {
	As(i any) bool
}

// Topic publishes messages.
type Topic interface {
	// SendBatch publishes msgs and returns only after the broker durably
	// accepted every one of them (publisher confirm, produce ack, send
	// response), or with an error. len(msgs) is never more than
	// Capabilities().MaxBatchSize when that is positive. SendBatch must not
	// retry and must not keep msgs after it returns. The portable layer has
	// already validated the messages against Capabilities. When the
	// messages did not all fare alike (some accepted, one refused as too
	// large once encoded), it returns a *BatchError saying which.
	SendBatch(ctx context.Context, msgs []*Message) error
	// Capabilities describes what the broker promises a publisher on this
	// topic: the publish half only. It must return the same value on every
	// call.
	Capabilities() capability.Topic
	// Classify maps an error returned by this driver to its class and says
	// whether the failed send may nevertheless have reached the broker.
	Classify(err error) ErrorInfo
	// As converts i to a driver-specific type (the SDK client, say). It
	// returns false if i is not supported. Driver docs list what it accepts.
	As(i any) bool
	// ErrorAs lets users reach the SDK's error types behind err.
	ErrorAs(err error, i any) bool
	// Close releases resources. It is called once.
	Close() error
}

// Subscription receives and settles messages.
type Subscription interface {
	// ReceiveBatch returns up to maxMessages messages (maxMessages >= 1). It
	// may wait for messages, but should return within a short, driver-chosen
	// time even if none arrived (returning an empty slice and nil error);
	// the portable layer calls it again. It returns ctx.Err() when ctx is
	// done first.
	ReceiveBatch(ctx context.Context, maxMessages int) ([]*Message, error)
	// SendAcks acknowledges the deliveries: the broker will not deliver them
	// again (for cumulative ack models, once every earlier delivery of the
	// same scope is acknowledged too). The portable layer passes many IDs
	// at once (broker.AckAll), so drivers settle them with as few broker
	// calls as the broker allows, and report outcomes that differ between
	// deliveries with a *BatchError (a nil return means all were acked).
	SendAcks(ctx context.Context, ids []AckID) error
	// SendNacks returns the deliveries to the broker for redelivery no
	// sooner than delay from now. Delay is zero unless
	// Capabilities().NackDelay is true.
	SendNacks(ctx context.Context, ids []AckID, delay time.Duration) error
	// SendDeadLetters moves the deliveries to the dead-letter queue, with
	// reason recorded where a consumer of that queue can read it (the header
	// HeaderDeadLetterReason on received messages). Called only when
	// Capabilities().DeadLetter is true.
	SendDeadLetters(ctx context.Context, ids []AckID, reason string) error
	// ExtendLocks keeps the deliveries locked (invisible to other consumers)
	// for d from now. Called only when Capabilities().LockExtendable is true.
	ExtendLocks(ctx context.Context, ids []AckID, d time.Duration) error
	// Capabilities describes what the broker promises a consumer of this
	// subscription: the delivery half only. It must return the same value on
	// every call.
	Capabilities() capability.Subscription
	// Classify maps an error returned by this driver to its class.
	Classify(err error) ErrorInfo
	// As converts i to a driver-specific type.
	As(i any) bool
	// ErrorAs lets users reach the SDK's error types behind err.
	ErrorAs(err error, i any) bool
	// Close releases resources. Unsettled deliveries return to the broker as
	// the broker does it (immediately, or when their lock expires). It is
	// called once.
	Close() error
}

// Prefetcher is implemented by subscriptions whose broker pushes deliveries
// to the client ahead of ReceiveBatch and needs a bound on them (RabbitMQ's
// basic.qos). The portable handler loop calls SetPrefetch with the most
// deliveries it will hold unsettled (broker.RunOptions.MaxOutstanding)
// before it receives, so that a user sets concurrency in one place. A
// driver whose user fixed the bound explicitly may ignore the call. n >= 1.
type Prefetcher interface {
	SetPrefetch(n int) error
}

// Peeker is implemented by subscriptions whose broker can show messages
// without delivering them (Service Bus's peek): no lock is taken and no
// delivery count rises. Each Peek returns up to max messages after the
// last one the previous Peek returned, in the broker's order, and none
// (no error) when there are no more; the messages carry no AckID.
type Peeker interface {
	Peek(ctx context.Context, max int) ([]*Message, error)
}

// HeaderDeadLetterReason is the header in which drivers report, on a message
// received from a dead-letter queue, why it was dead-lettered.
const HeaderDeadLetterReason = "wary-dead-letter-reason"
