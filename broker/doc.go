// Package broker is wary's portable messaging API: topics to publish to,
// subscriptions to receive from, and deliveries to settle, over drivers for
// brokers that promise at-least-once delivery (in-memory, RabbitMQ, Kafka,
// SQS FIFO, Azure Service Bus).
//
// Users hold the concrete types *Topic, *Subscription and *Delivery, made by
// a driver's constructor (memory.Broker.OpenTopic, rabbit.OpenTopic, ...) or
// from a URL with OpenTopic and OpenSubscription once the driver package is
// imported. Drivers implement the small interfaces of package
// broker/driver; validation, retries, error classification and the handler
// loop live here, once.
//
// # Capabilities
//
// Every topic and subscription reports its Capabilities: the broker's
// promise as data, not as behaviour to discover, each half on the side that
// owns it. A Topic's capability.Topic are what a publisher is promised:
// the key and whether it is required, the dedup window and scope, size and
// batch limits. A Subscription's capability.Subscription are what a
// consumer is promised: the ordering scope and head-of-line blocking as
// delivered, the ack model, the delivery count and limit, dead-lettering,
// the lock timeout and its extension, delayed nacks, the redelivery
// horizon. No topic declares a consumer's facts. The conformance suite
// proves each field against the live broker, through the side that
// declares it. What the broker does not promise is the
// application's job, and package idem does it.
//
// A declaration is never a guess. Where a driver cannot learn a value, it
// says so: a redelivery horizon is capability.HorizonUnknown when the driver could not
// read the broker's configuration, capability.HorizonUnbounded when copies can arrive
// at any time (a queue that keeps an unacked message until it is settled,
// a topic that keeps records forever), and a duration only when the broker
// enforces one. Likewise a LockTimeout of 0 says a delivery is held until
// settled (or the consumer goes away), and capability.LockNone that it is not locked
// at all (an SQS queue with VisibilityTimeout 0 hands it out again at
// once), which Subscription.Run refuses. A lock whose bound the driver
// cannot read is in capability.Subscription.Source.Unread, and its
// LockTimeout is not the broker's word: RabbitMQ closes the channel of a
// consumer that holds a delivery past consumer_timeout, a server-wide
// setting no interface shows, so its lock is unknown, not held until
// settled.
//
// # Messages
//
// A message has a stable logical ID (driver.ValidateID: 1 to driver.MaxIDLen bytes of
// UTF-8 without control characters, not only white space; Publish gives
// an empty ID a random one), an ordering key, headers (UTF-8 names and values; names starting
// with "wary-" are reserved for wary and its drivers, except the
// event-identity headers such as HeaderAggregateID) and a body of any
// bytes. Drivers round-trip all of it unchanged, and trust no reserved
// header that a producer could have set.
//
// # Delivery
//
// Delivery is at least once. A message is delivered again when it is
// nacked, when its lock (visibility timeout, peek-lock) expires, when the
// consumer holding it closes or crashes, and, with cumulative acks (Kafka),
// when any earlier message of its partition was not acked before a crash.
// Delivery.Attempt counts deliveries where capability.Subscription.DeliveryCount says
// the broker counts them. A consumer must therefore be idempotent: see
// package idem, which records each message ID in the same transaction as
// the consumer's effect.
//
// Settle each delivery once: Ack, Nack (with a delay where NackDelay is
// declared) or DeadLetter (where DeadLetter is declared; readers of the
// dead-letter queue find the reason in the header driver.HeaderDeadLetterReason;
// OpenDeadLetters opens that queue from the consumer's own subscription
// URL, whatever the driver).
// Settling again is a no-op that returns nil. Ack returns an error, so that
// "the effect committed but the ack failed" is visible; the redelivery that
// follows must be recognised as a duplicate. Subscription.Run, the one
// handler loop, settles what the handler left unsettled, retries transient
// settle failures, and retries a failed Ack rather than nack a delivery
// whose handler chose to acknowledge it. RunOptions.Concurrency is the one
// knob for parallelism: drivers that prefetch (RabbitMQ) size their buffer
// from it.
//
// AckAll acknowledges many deliveries with one driver call
// (driver.Subscription.SendAcks with all their IDs), with Ack's guarantees
// and an outcome per delivery: one offset commit on Kafka, one multiple ack
// on RabbitMQ where no other delivery of the channel lies between the tags,
// DeleteMessageBatch calls of ten on SQS; Service Bus settles each message
// by its lock token. Package idem acknowledges its committed transactions
// with AckAll; Run groups the acks of handlers that finish while another
// ack is in flight into one AckAll (an ack issued alone goes out at once:
// grouping adds no delay).
//
// # Handlers
//
// A Handler processes one delivery; a middleware is a function that wraps
// one in another (package idem's inbox is one). Typed decodes each body into a value with a Codec
// (JSON by default; NewMessage encodes one): a body that does not decode
// is an error matching ErrUndecodable, marked Permanent, so Run
// dead-letters it with the reason instead of retrying it. When Run's
// context ends it drains: nothing new starts, deliveries waiting behind
// their key are left to come back when the subscription closes, and
// handlers in flight keep a live context for up to RunOptions.DrainTimeout;
// the delivery of one that fails then is left unsettled too, in its place
// before them.
//
// # Ordering
//
// Order is kept only inside the declared scope (capability.OrderingScope), for
// messages with the same Key. Subscription.Run with RunOptions.PerKey runs
// one handler per key at a time in arrival order, so that order also holds
// while handlers run in parallel. With HeadOfLine, the broker itself holds
// back a scope's later messages while one is unsettled.
//
// # Dedup
//
// A broker with a DedupWindow drops a second publish of the same Message.ID
// inside the window, silently. Outside the window, and on brokers without
// one, duplicates reach consumers.
//
// # Errors
//
// Errors are *Error values classified with errors.Is: ErrNotFound,
// ErrTooLarge, ErrInvalid, ErrClosed, ErrLockLost, ErrPermission and
// ErrRetryable, plus context.Canceled and context.DeadlineExceeded. A
// Publish error matches exactly one of ErrNotSent (none of the messages is
// on the broker: safe to send again) and ErrMaybeSent (the broker may have
// some). When the messages of a Publish fared differently (some accepted,
// one refused as too large once encoded), Error.Messages says what became
// of each; Publish sends again, up to the retry policy, only the messages
// that failed for a transient reason, never one the broker accepted.
// Invalid messages (missing required key, a bad ID, a non-UTF-8 or
// reserved header, over the size limit) are rejected before anything is
// sent; for a Publish of several messages, Error.Messages then holds each
// refused message's own error and, for the others, one that matches
// ErrNotSent and driver.ErrNotAttempted, and the text names the first
// refused message by its index in the call ("wary: publish (invalid)
// [0 of 3 sent, 1 failed]: message 2: ..."); a driver that refuses a
// message before sending reports it the same way. Backoff delays carry full jitter. The SDK's own error is reachable
// with Topic.ErrorAs and Subscription.ErrorAs. Credentials never appear in
// errors or logs: connection strings are shown through RedactString
// (which hides a URL's userinfo up to its last "@" even when the URL does
// not parse: white space or quotes in the password, a missing or odd
// scheme), a URL that does not parse is shown by its scheme alone
// ("amqp://…"), and a malformed URL parameter is named without its value.
//
// # Telemetry
//
// Topics and subscriptions report OpenTelemetry spans and metrics through
// the providers of the Telemetry that TopicOptions and SubscriptionOptions
// embed (TracerProvider, MeterProvider; default the global ones, which do
// nothing until an application installs an SDK). The package uses only the OpenTelemetry
// API. Names follow the messaging semantic conventions: messaging.system
// and messaging.destination.name come from the driver (see
// driver.Describer).
//
//   - Publish starts a "send DESTINATION" span (kind producer) under the
//     caller's span, and writes its context into each message that carries
//     no W3C traceparent header as traceparent and tracestate (the caller's
//     header map is not modified; the two headers are not counted against
//     the size limits Publish checks). A message that carries a context
//     already (from package idem's outbox) keeps it, and the span links to
//     it. With no tracing anywhere, nothing is added.
//   - Run starts a "process DESTINATION" span (kind consumer) for each
//     delivery, a child of the message's context that also links to it;
//     the handler's ctx holds it, and it ends after the delivery is
//     settled, with the handler's error. Receive starts no span.
//   - Counters, by messaging.system and messaging.destination.name:
//     messaging.client.sent.messages (messages Publish delivered to the
//     broker), messaging.client.consumed.messages (deliveries Receive
//     returned, redeliveries included), wary.messages.settled (successful
//     settlements, by wary.settlement: ack, nack, dead_letter). A
//     dead_letter is one the application settled with DeadLetter; a
//     message the broker moves to its dead-letter queue by itself (at its
//     delivery limit, or when its lock or TTL runs out) is not seen by the
//     client and not counted: count those on the broker's side.
package broker
