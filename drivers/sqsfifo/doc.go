// Package sqsfifo is the wary driver for Amazon SQS FIFO queues, on
// aws-sdk-go-v2 (service/sqs).
//
// Constructors take the caller's context first, which bounds the
// requests of the open (the driver sets no timeout of its own), then the
// caller's *sqs.Client (configured as any SDK client: region, credentials,
// endpoint, retryer), the queue (a queue URL, or a name ending in ".fifo"
// that GetQueueUrl resolves), and the options last, whose portable part is
// the embedded broker.TopicOptions or broker.SubscriptionOptions:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	client := sqs.NewFromConfig(cfg)
//	orders, err := sqsfifo.OpenTopic(ctx, client, "orders.fifo", nil)
//	sub, err := sqsfifo.OpenSubscription(ctx, client, "orders.fifo", nil)
//	dead, err := sqsfifo.OpenDeadLetters(ctx, client, "orders.fifo", nil)
//
// The client stays the caller's: Close closes nothing. Only FIFO queues
// are served: opening a standard queue fails with broker.ErrInvalid.
//
// # URLs
//
// Importing the package registers the scheme "sqsfifo" on
// broker.DefaultURLMux:
//
//	sqsfifo://orders.fifo?region=eu-west-1
//	sqsfifo://orders.fifo?endpoint=http://127.0.0.1:4566&region=us-east-1   (LocalStack, fauxqs)
//
// The client comes from the SDK's default configuration chain
// (environment, shared files, SSO, instance and container roles); URLs
// carry no credentials, and the driver never prints any. Parameters:
// region, endpoint, dedup_window (a Go duration) and, for subscriptions,
// wait_time (a Go duration, at most 20s) and dead_letters (a boolean: the
// queue is a dead-letter queue, read as OpenDeadLetters reads it, reasons
// reported). Any other parameter, and a
// malformed value, is an error matching broker.ErrInvalid that names the
// parameter and never echoes its value. broker.OpenDeadLetters on a
// subscription's URL opens the dead-letter queue its RedrivePolicy names,
// as OpenDeadLetters does (see URLOpener.OpenDeadLettersURL).
//
// # Delivery semantics
//
// Capabilities are read from the queue's attributes when it is opened
// (GetQueueAttributes), so topic and subscription of one queue declare the
// same:
//
//   - Order and head-of-line per message group: Message.Key is the
//     MessageGroupId and is required (KeyRequired); SQS does not deliver a
//     group's next message while an earlier one is in flight.
//   - Dedup: Message.ID is the MessageDeduplicationId, deduplicated for
//     5 minutes (fixed by AWS; TopicOptions.DedupWindow declares another
//     window for an emulator), across the queue, or inside the message
//     group when the queue's DeduplicationScope is messageGroup.
//   - Ack is DeleteMessageBatch, ten per call for many acks at once
//     (broker.AckAll, as Run groups the acks of concurrent handlers, and
//     package idem those of a grouped transaction, idem.Options.Batch); an
//     entry SQS refuses fails alone.
//   - Lock: the queue's VisibilityTimeout is LockTimeout; ExtendLock and
//     Nack(delay) are ChangeMessageVisibility (up to 12 hours; Nack(0)
//     releases at once). A nacked message stays at the head of its group,
//     which waits for it: a delay holds the whole group. A VisibilityTimeout
//     of 0 locks nothing: a received message is visible again at once, and
//     received again while its handler runs. It is declared as
//     capability.LockNone (not extendable), wary explain states "no lock", and
//     Subscription.Run refuses the subscription (ErrInvalid).
//   - Delivery count and limit: ApproximateReceiveCount is
//     Delivery.Attempt; a RedrivePolicy's maxReceiveCount is the native
//     DeliveryLimit, its deadLetterTargetArn the dead-letter queue, which
//     OpenDeadLetters opens. Messages SQS moved there carry no reason: that
//     subscription reports RedriveReason for them.
//   - DeadLetter(reason) sends a copy (same body, attributes, group and
//     deduplication ID) to the dead-letter queue with the attribute
//     wary-dead-letter-reason, then deletes the original. The two calls
//     are not atomic: a failure between them leaves the message in both
//     queues, never in neither; the original comes back after its
//     visibility timeout, and dead-lettering it again within 5 minutes
//     sends a copy that SQS deduplicates. Only a subscription opened by
//     OpenDeadLetters reports that attribute; elsewhere, and as a header
//     inside wary-headers, it is dropped on receipt, as is every reserved
//     (wary-...) name another producer could have set.
//   - Redelivery horizon: the queue's MessageRetentionPeriod.
//   - Size: the queue's MaximumMessageSize, less 256 bytes kept for the
//     driver's attributes, is MaxMessageSize; SendBatch measures the
//     encoded message (body and attributes, as SQS counts them) and
//     refuses one over the queue's limit with broker.ErrTooLarge before
//     sending anything. Batches are of at most ten messages whose encoded
//     sizes add up to at most the queue's limit.
//
// Receiving long-polls (SubscriptionOptions.WaitTime, default 2s). A long
// poll whose caller gives up (its context ends) runs to its end, and the
// next receive gets what it brought, rather than leaving those messages,
// and their groups, invisible until the visibility timeout. Every
// ReceiveMessage carries a ReceiveRequestAttemptId; after a failed one the
// next reuses it, so SQS returns what the lost answer held. Close waits
// for a poll in flight and makes what no caller received visible again.
//
// # What is read from the queue
//
// Every field above comes from the queue's attributes, read with
// GetQueueAttributes when the queue is opened, and both sides' Source.Read
// says so ("FIFO queue orders.fifo's attributes (GetQueueAttributes)"):
// FifoQueue, DeduplicationScope (with FifoThroughputLimit
// perMessageGroupId, the dedup scope is the message group), RedrivePolicy
// (maxReceiveCount and the dead-letter queue), VisibilityTimeout,
// MessageRetentionPeriod and MaximumMessageSize. An answer that lacks
// VisibilityTimeout, MaximumMessageSize, MessageRetentionPeriod or
// DeduplicationScope (an emulator's may) leaves that setting in
// Source.Unread, stated as unknown: the lock and the size hold SQS's
// defaults (30 s, 256 KiB), the dedup scope the queue, the horizon is
// HorizonUnknown. A queue created by hand,
// not by wary, is described as it is. ContentBasedDeduplication does not
// matter: the driver always sends a MessageDeduplicationId, which takes
// precedence over the content's hash.
//
// The attributes are needed: without the permission
// sqs:GetQueueAttributes (and sqs:GetQueueUrl for a queue given by name,
// and for the dead-letter queue) the open fails with broker.ErrPermission,
// naming the permission, rather than guessing the limits and the
// dead-letter queue.
//
// The deduplication window is not an attribute. On AWS (a client with no
// endpoint of its own, or one under amazonaws.com) it is SQS's fixed
// 5 minutes, declared whatever the options say; a dedup_window
// (TopicOptions.DedupWindow) stating another is a Conflict, which wary
// explain flags with its fix (drop it). On any other endpoint (LocalStack,
// fauxqs) the window declared is dedup_window's, or 5 minutes, and the
// topic lists it in Source.Unread: wary explain states it as unknown.
// Nothing else in a URL states a queue setting: wait_time is the
// receive's own long poll, which overrides the queue's
// ReceiveMessageWaitTimeSeconds and promises nothing.
//
// # Encoding
//
// AWS's input rules are enforced before sending, whatever the endpoint:
//
//   - A MessageGroupId and a MessageDeduplicationId are 1 to 128 ASCII
//     letters, digits and punctuation characters. A Key or ID that breaks
//     that rule is mapped by MapID to "wary-sha256-" and the hex SHA-256 of
//     it (the same input always maps to the same output, so grouping and
//     dedup work), and the original travels in the attribute wary-key or
//     wary-id, from which receivers restore it.
//   - Headers travel in one attribute, wary-headers, a JSON object of
//     strings (SQS allows ten attributes per message; the driver uses at
//     most five). Received attributes of type String or Number other than
//     the driver's become headers, so messages from other producers read
//     naturally.
//   - SQS bodies are XML text. A body that is valid UTF-8 made only of
//     characters #x9, #xA, #xD, #x20-#xD7FF and #xE000-#xFFFD is sent as
//     it is. Any other body (binary, or holding characters above U+FFFF,
//     which AWS accepts but emulators refuse) is sent base64-encoded
//     (standard alphabet, padded) with the attribute wary-body=base64; an
//     empty body is sent as "-" with wary-body=empty. A consumer that does
//     not use wary reads the body as text unless wary-body says otherwise.
//     Base64 takes 4/3 of the bytes: such a body fits if its encoded size
//     does.
//   - Attribute values that are not such text go as Binary attributes.
//
// # As
//
// Topic.As and Subscription.As accept **sqs.Client and *QueueURL.
// Message.As on received messages accepts *types.Message (the SDK's
// message, with its receipt handle and attributes). ErrorAs reaches the
// SDK's errors (smithy.APIError, *smithy.OperationError, the
// service/sqs/types error types) and the driver's *EntryError.
//
// # Errors
//
// A missing queue is broker.ErrNotFound; access denied and credential
// failures are broker.ErrPermission; throttling, SQS's internal errors and
// lost connections are broker.ErrRetryable; an expired receipt handle
// (settling after the visibility timeout) is broker.ErrLockLost; SQS's
// validation errors are broker.ErrInvalid. The driver does not retry; the
// SDK's retryer (the client's) does, then the portable layer.
//
// A Publish whose messages did not all succeed says, in
// broker.Error.Messages, what became of each: nil for one SQS accepted, an
// error matching broker.ErrNotSent for one SQS refused (its *EntryError,
// with SQS's code, is retryable when SQS blamed itself) or the driver never
// sent (a message of the same batch broke a rule first, or an earlier
// request failed), and broker.ErrMaybeSent for one whose request failed
// after it was written. The whole error is broker.ErrMaybeSent when any
// message may be on the queue. The portable layer sends again, up to its
// retry policy, only the messages that failed for a transient reason; that
// may put a group's refused message after a later one of the same group
// that was accepted.
package sqsfifo
