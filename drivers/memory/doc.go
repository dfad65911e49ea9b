// Package memory is wary's embedded broker: topics and subscriptions held in
// process memory, with the delivery semantics of a real broker, so that
// programs and tests run with no service to set up.
//
// A Broker is a namespace of topics. Each topic has a TopicConfig whose
// Profile selects the broker imitated (Queue, Partitioned, SQSFIFO,
// ServiceBus); its subscriptions inherit the configuration. Every
// subscription gets its own copy of each message published after it was
// created; each OpenSubscription call is one more competing consumer on
// it. Time (lock expiry, nack delays, dedup windows, retention) comes from
// a Clock: the real one by default, or a FakeClock that tests advance by
// hand. The Broker starts no goroutines: time-based events are applied
// when a consumer receives or settles, and a waiting receiver wakes on a
// signal (a publish, a settle, a consumer opening or closing) or at the
// next due time through Clock.After.
//
// Broker.OpenTopic, OpenSubscription and OpenDeadLetters take
// TopicOptions and SubscriptionOptions, which embed the portable
// broker.TopicOptions and broker.SubscriptionOptions, as every driver's
// do; the behaviour of a topic and its subscriptions is its TopicConfig,
// set when the topic is created.
//
// # URLs
//
// Importing the package registers the scheme "mem" on broker.DefaultURLMux,
// on the process-wide broker Default():
//
//	mem://orders?profile=sqsfifo&lock=30s&limit=5&dedup=5m     a topic
//	mem://orders/billing?profile=sqsfifo                        a subscription
//
// The opener creates the topic (with the parameters' configuration) and the
// subscription if they do not exist. Parameters: profile (queue,
// partitioned, sqsfifo, servicebus), lock, dedup and retention (Go
// durations), limit, partitions (1 to MaxPartitions) and maxsize
// (integers), as in TopicConfig, and nackdelay (a boolean, default true;
// false is TopicConfig.NoNackDelay). Unknown parameters, malformed or
// out-of-range values (the error names the parameter, never its value),
// a profile or a nackdelay other than that of an existing topic, userinfo (the scheme
// takes no credentials) and a fragment, are errors matching
// broker.ErrInvalid, which never show a parameter's value; the other parameters of an existing topic are
// ignored, and those that state another value than it holds are
// conflicts (see below). broker.OpenDeadLetters(ctx, "mem://orders/billing") opens the
// subscription's dead letters (Broker.OpenDeadLetters) from the same URL.
// Use URLOpener to open URLs on another Broker.
// Messages published to a topic that has no subscription yet are dropped,
// as on any fan-out broker: open the subscription first.
//
// # Delivery semantics
//
// Common to every profile: each delivery of a message counts as an attempt
// (the first is 1) and gets a fresh lock token. A delivery is settled by
// ack, nack (ready again after the delay), dead-letter, or it returns to
// the queue when its lock expires or its consumer closes. A message that
// returns to the queue (nack, lock expiry, consumer closed) after
// TopicConfig.DeliveryLimit deliveries goes to the dead-letter queue
// instead, with reason "delivery limit exceeded (N)". Settling a delivery
// that no longer holds its lock fails with an error matching
// broker.ErrLockLost. Bodies and headers are copied on publish and on
// receive. Messages are dropped, delivered or not, once they are older than
// TopicConfig.MessageRetention, the declared RedeliveryHorizon (counted from the
// original publish, also for dead-lettered copies). A publish returns once
// every message is stored. A receive waits until a message is deliverable
// to that consumer; one whose context is already done returns what is
// deliverable at once, or the context's error (a poll).
//
// Queue: no order; messages go out oldest first among those ready;
// per-message acks; lock timeout 30s by default, extendable; native
// delivery limit, 10 by default; no dedup unless DedupWindow is set.
//
// Partitioned (Kafka): a record goes to partition FNV-1a(key) mod
// Partitions (round-robin without a key). Partitions are assigned to the
// open consumers of the subscription, round-robin in the order they were
// opened, and reassigned whenever one opens or closes. A consumer receives
// only its partitions' records, in offset order, several in flight at once;
// a nacked record alone is redelivered after its delay, without holding the
// partition back. Acks are cumulative: each partition commits the end of
// its contiguous settled prefix, and when a partition is revoked (a
// rebalance, a consumer closing) every record from the commit point on,
// acked or not, is delivered again to the next owner, and the old owner's
// settles of them fail with ErrLockLost. Dead-lettered records count as
// settled and are not redelivered. Locks do not expire by default
// (LockTimeout 0) and cannot be extended; the delivery limit is emulated
// (the library's, as with Kafka): the count lives with the consumer, so
// after a revoke the next owner delivers a record handed out before as
// attempt 2, however often it was delivered.
//
// SQSFIFO: order and head-of-line per message group (Message.Key, which is
// required): the earliest unsettled message of a group is delivered first,
// and no other message of the group is delivered while one is in flight or
// waiting out a nack delay. This is stricter than SQS, which may hand out
// several messages of one group in one receive. Duplicate publishes of a
// message ID within DedupWindow (5 minutes by default), counted from the
// first publish, across all groups of the topic, are accepted and
// dropped. Visibility timeout LockTimeout, extendable; batches of at most
// 10; messages of at most 256 KiB.
//
// ServiceBus (a queue or topic subscription with sessions): order and
// head-of-line per session (Message.Key, which is required), with the same
// rule as SQSFIFO: one message of a session in flight at a time. This
// simplifies real sessions, where a receiver locks a whole session and may
// hold several of its messages; the order seen by a handler is the same.
// Duplicate detection on the message ID within DedupWindow (10 minutes by
// default), per topic; a delivery stays with its consumer until settled or
// the consumer closes (LockTimeout none by default: the session lock is
// renewed while held); no delayed Nack (NackDelay false, as the driver
// declares for sessions); messages of at most 256 KiB.
//
// TopicConfig.NoNackDelay takes the delayed Nack away from any profile
// (a Service Bus topic subscription without sessions is Queue with
// NoNackDelay). A Nack with a delay then fails with errors.ErrUnsupported.
//
// The dead-letter queue of a subscription (OpenDeadLetters) is a plain
// queue on the same clock: no order, per-message acks, the topic's lock
// timeout, no delivery limit and no dead-letter queue of its own. Its
// messages keep their ID, key, headers and body, carry the reason in the
// header driver.HeaderDeadLetterReason, and start again at attempt 1.
//
// Dedup applies per topic, before the fan-out to subscriptions. With
// TopicConfig.DedupScope capability.DedupMessageGroup (any profile), an ID is
// remembered per Message.Key: the same ID in another group is a new
// message, as in an SQS FIFO queue with DeduplicationScope messageGroup.
//
// The topic's configuration is the broker itself, so every capability is
// read from it: each side's Source.Read says so ("the embedded broker's
// configuration of topic orders", "... of subscription orders/billing"),
// and nothing is unread. A URL configures a topic only when it creates it:
// the parameters of a URL opening an existing topic that state another
// value than the topic holds (limit=5 on a topic created with limit=10)
// are Conflicts of the side it opens, which wary explain flags with the
// fix. A topic or subscription that does not exist when opened declares
// the default configuration's capabilities, each listed in Source.Unread.
//
// # As targets
//
// Topic.As and Subscription.As accept **Broker, the broker the topic or
// subscription belongs to. Message.As and ErrorAs accept nothing.
//
// # Errors
//
// Publishing to a topic that does not exist, and receiving from a
// subscription that does not exist, fail with errors matching
// broker.ErrNotFound (opening them succeeds, so that the failure is fast
// and explicit). A message without the key a profile requires, or a batch
// over its limit, fails with broker.ErrInvalid; a message over
// MaxMessageSize with broker.ErrTooLarge. Settling a delivery that lost its
// lock fails with broker.ErrLockLost. Calls after Close of a topic, a
// subscription or the Broker fail with broker.ErrClosed. No error of this
// driver means "maybe sent": a failed publish stored nothing. The errors of
// Broker methods (CreateTopic, CreateSubscription) match the same
// broker error classes with errors.Is.
package memory
