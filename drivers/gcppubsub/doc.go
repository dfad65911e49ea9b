// Package gcppubsub is the wary driver for Google Cloud Pub/Sub, on
// cloud.google.com/go/pubsub/v2.
//
// Constructors take the caller's context first, which bounds the
// requests of the open (the driver sets no timeout of its own), then the
// caller's *pubsub.Client (configured as any SDK client: project,
// credentials, endpoint), the topic or subscription (a bare name in the
// client's project, or projects/PROJECT/topics/NAME,
// projects/PROJECT/subscriptions/NAME), and the options last, whose
// portable part is the embedded broker.TopicOptions or
// broker.SubscriptionOptions:
//
//	client, err := pubsub.NewClient(ctx, "my-project")
//	orders, err := gcppubsub.OpenTopic(ctx, client, "orders", nil)
//	sub, err := gcppubsub.OpenSubscription(ctx, client, "orders-billing", nil)
//	dead, err := gcppubsub.OpenDeadLetters(ctx, client, "orders-billing", nil)
//
// The client stays the caller's: Close closes nothing. Only pull
// subscriptions are served: opening a push subscription fails with
// broker.ErrInvalid.
//
// # URLs
//
// Importing the package registers the scheme "gcppubsub" on
// broker.DefaultURLMux:
//
//	gcppubsub://projects/my-project/topics/orders
//	gcppubsub://projects/my-project/subscriptions/orders-billing?wait_time=5s
//
// Each URL gets a client of its own for the URL's project, from the SDK's
// Application Default Credentials, or the emulator at
// PUBSUB_EMULATOR_HOST when that is set (as the SDK does); the topic or
// subscription closes it. URLs carry no credentials and the driver never
// prints any. Parameters are listed on URLOpener; any other, and a
// malformed value, is an error matching broker.ErrInvalid that names the
// parameter and never echoes its value. broker.OpenDeadLetters on a
// subscription's URL opens the subscription of its dead-letter topic.
//
// # Delivery semantics
//
// Capabilities are read from the live configuration when the topic or
// subscription is opened, never from the URL: the subscription's from
// GetSubscription (the Source.Read of its capabilities names what was
// read), the topic's from GetTopic and, to decide ordering keys, its
// subscriptions' (ListTopicSubscriptions, GetSubscription).
//
//   - Order: a subscription with message ordering enabled delivers the
//     messages of one ordering key in publish order (OrderMessageGroup,
//     HeadOfLine). Message.Key is sent as the ordering key when a
//     subscription of the topic orders (TopicOptions.Ordering: OrderingAuto),
//     and in the attribute wary-key otherwise; receivers read it back
//     either way. A subscription without ordering delivers in any order.
//   - No publish-side dedup: Pub/Sub keeps every message published, and a
//     retried publish may store a message twice (DedupNone); Message.ID
//     travels in the attribute wary-id. The inbox (package idem) drops
//     duplicates.
//   - Acks are Acknowledge, up to 1000 ack IDs per call (broker.AckAll).
//     Without exactly-once delivery Pub/Sub confirms nothing per message:
//     a lost ack is a redelivery. With exactly-once delivery
//     (enable_exactly_once_delivery), Pub/Sub answers for each ack ID it
//     refuses; the driver checks that answer, as the SDK's AckWithResult
//     does: a permanent refusal (the ack deadline passed, the message was
//     delivered again) fails that delivery's ack with an *AckError that
//     matches broker.ErrLockLost — the message will come again, and the
//     handler's effect must be idempotent (package idem) — and a transient
//     one with broker.ErrRetryable. An ack that succeeded is final: the
//     message is not delivered again.
//   - Lock: the subscription's ack deadline is LockTimeout; ExtendLock and
//     Nack(delay) are ModifyAckDeadline (at most 600 s; Nack(0) makes the
//     message available at once). A subscription's retry policy delays
//     redeliveries further, by Pub/Sub's backoff.
//   - Delivery count and limit: with a dead-letter policy, Pub/Sub counts
//     deliveries (Delivery.Attempt is the message's delivery_attempt) and
//     moves a message to the dead-letter topic after max_delivery_attempts
//     (5 to 100; 5 when unset): DeliveryLimit, native. Without one,
//     Pub/Sub reports no count: Attempt is 1 and DeliveryCount false.
//   - DeadLetter(reason) publishes a copy (same data, attributes and
//     ordering key, with the attribute wary-dead-letter-reason) to the
//     dead-letter topic, then acknowledges the original; a failure between
//     the two leaves the message in both, never in neither.
//     OpenDeadLetters reads a subscription of the dead-letter topic
//     (SubscriptionOptions.DeadLetterSubscription, or its only one);
//     messages Pub/Sub moved there carry RedriveReason.
//   - Redelivery horizon: the subscription's message_retention_duration
//     (7 days when unset): Pub/Sub drops an unacknowledged message older.
//   - Size: Pub/Sub's 10 MB per message (data, attributes and ordering
//     key; a fixed limit, not a setting), less 4 KiB for the driver's
//     attributes, is MaxMessageSize. Pub/Sub's attribute limits (100 per
//     message, names of 256 bytes that do not start with "goog", values of
//     1024 bytes) and its 1024-byte ordering keys are checked before
//     sending: a message that breaks one is refused with an error matching
//     broker.ErrTooLarge (a size or count) or broker.ErrInvalid (a reserved
//     name), and nothing of its batch is sent.
//
// Receiving is unary Pull (SubscriptionOptions.WaitTime bounds one call,
// default 2s), not the SDK's streaming Receive: Receive extends every
// message's lease on its own until MaxExtension, which would leave no
// lock for LockTimeout to state and ExtendLock to renew. A Pull whose
// caller gives up runs to its end and the next receive gets what it
// brought; Close waits for it and makes what no caller received available
// again.
//
// # Headers
//
// Headers travel as attributes, one per header, so that subscription
// filters can select on them. Received attributes other than the
// driver's become headers, except reserved wary- names another producer
// could have set and the client libraries' googclient_ attributes; the
// reason attribute is reported only by a subscription opened by
// OpenDeadLetters (or with dead_letters=true).
//
// # As
//
// Topic.As accepts **pubsub.Client and **pubsubpb.Topic (the
// configuration read at open). Subscription.As accepts **pubsub.Client,
// **pubsubpb.Subscription and *Config (what the driver made of it:
// ordering, exactly-once, ack deadline, dead-letter policy, retention,
// retry policy, filter). Message.As on received messages accepts
// **pubsubpb.ReceivedMessage and **pubsubpb.PubsubMessage. ErrorAs reaches
// the SDK's *apierror.APIError and the driver's *AckError.
//
// # Errors
//
// gRPC codes map to the broker's classes: NotFound is broker.ErrNotFound;
// PermissionDenied and Unauthenticated broker.ErrPermission;
// InvalidArgument, FailedPrecondition and AlreadyExists broker.ErrInvalid
// (broker.ErrTooLarge when it is about a size); ResourceExhausted,
// Unavailable, Internal, Unknown and Aborted broker.ErrRetryable. A publish
// that failed with Unavailable on a connection never made is NotSent;
// after the request left (Unavailable otherwise, Internal, Unknown,
// Aborted, DeadlineExceeded, Canceled) it is broker.ErrMaybeSent; a
// refusal (InvalidArgument, NotFound, PermissionDenied, ResourceExhausted)
// is NotSent. The driver does not retry; the client's gax retry settings
// do, then the portable layer.
//
// # Telemetry
//
// The portable layer's OpenTelemetry spans and metrics (broker.Telemetry
// in the options) name the system "gcp_pubsub" and the topic or
// subscription as the destination. The SDK's own tracing is the client's
// (pubsub.ClientConfig.EnableOpenTelemetryTracing).
//
// # Testing
//
// Package psemu serves Google's in-process fake, pstest, on a local
// address, for tests and local runs.
package gcppubsub
