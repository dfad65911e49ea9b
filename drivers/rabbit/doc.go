// Package rabbit is wary's RabbitMQ driver, on github.com/rabbitmq/amqp091-go.
//
// Open a Conn with Dial (it reconnects by itself), then topics with
// OpenTopic (publishing to an exchange) and subscriptions with
// OpenSubscription (consuming a queue). Declare creates the usual
// topology: an exchange, a quorum queue with a single active consumer (or
// one per partition), and a dead-letter exchange and queue; existing
// topology is used as it is. Many topics and subscriptions share one Conn.
//
// Options: TopicOptions and SubscriptionOptions embed the portable
// broker.TopicOptions and broker.SubscriptionOptions (publish retries,
// logger), as every driver's do; Topology.TopicOptions and
// Topology.SubscriptionOptions fill in the rest for a declared topology.
// Concurrency is set once, in broker.RunOptions: Run sizes RabbitMQ's
// prefetch from it (see Prefetch under Delivery semantics).
//
// # URLs
//
// Importing the package registers three schemes on broker.DefaultURLMux:
//
//	rabbit://orders?partitions=4               topic: exchange "orders", server from WARY_RABBIT_URL
//	rabbit://orders?delivery_limit=5&dead_letter_exchange=orders.dlx&nack_delay=true   subscription: queue "orders"
//	rabbit://orders?partitions=4&assigned=0,1      subscription: partitions 0 and 1 of 4
//	amqp://user:pass@host:5672/vhost?exchange=orders   topic, server in the URL
//	amqps://user:pass@host/vhost?queue=orders&prefetch=20   subscription, over TLS
//
// Each URL-opened topic or subscription dials its own Conn and closes it
// with itself. Parameters are those of TopicOptions and
// SubscriptionOptions in snake case (see URLOpener); amqp091-go's own URI
// parameters (heartbeat, connection_timeout, ...) pass through to the
// connection; any other parameter, or a value of the wrong type, is an
// error matching broker.ErrInvalid (which does not repeat the value).
// Passwords never appear in errors or logs: the package prints server URLs
// through broker.Redact, never amqp091-go's URI.String, which includes the
// password.
//
// # Delivery semantics
//
// Publish: every message is published with publisher confirms and the
// mandatory flag; Publish returns after RabbitMQ confirmed every message of
// the batch. Message.ID is the AMQP message-id, Headers the AMQP headers
// (string values), Key the routing key (partitioned: the partition number
// is the routing key and Key travels in the wary-key header). A message no
// queue takes is returned by the broker and fails with ErrNotFound and
// ErrNotSent. If the channel or connection drops before the confirm, the
// error matches ErrMaybeSent and ErrRetryable. RabbitMQ has no broker-side
// dedup: DedupWindow is 0, consumers need an inbox (package idem).
//
// Ordering, in two modes:
//
//   - One queue with x-single-active-consumer (Topology.Partitions 0):
//     scope queue. Whatever the number of subscriptions, one consumer
//     receives at a time, in queue order; the next takes over when it goes
//     away. Capabilities.Ordering is OrderQueue.
//   - Partitioned (Partitions N > 1): N quorum queues bound to a direct
//     exchange by the keys "0".."N-1"; the topic picks the partition as
//     FNV-1a(Key) mod N (FNV-1a of the ID without a key), and each queue
//     has its own single active consumer: order per key across consumers.
//     Capabilities.Ordering is OrderPartition (whatever share a
//     subscription consumes: the promise is per partition). By default a
//     subscription consumes every partition queue; with
//     SubscriptionOptions.Assigned it consumes only its share of them.
//
// In both modes, HeadOfLine is false: with a prefetch above one, later messages
// reach the consumer while an earlier one is unsettled (the handler loop's
// PerKey option keeps handlers serial per key).
//
// A subscription registers its consumer when it starts receiving (Run, or
// its first Receive), not at OpenSubscription, so that the consumer has the
// prefetch Run asks for.
//
// Scaling out the partitioned mode: RabbitMQ 3.10 (which does not weigh
// consumer priorities in this choice) makes the first consumer registered on a
// queue with a single active consumer the active one, and on its
// departure the next registered. Subscriptions that all consume every
// partition therefore leave the first of them active on all partitions
// and the others as hot standbys: failover, no spread. To spread N
// partitions over M instances, give each instance a share:
// Assigned = Share(N, M, i) for instance i (or assigned=0,2 in a URL), so
// that the shares are disjoint and cover every partition. Each partition
// still has one active consumer, so per-key order holds across instances;
// handlers run in parallel across partitions. A partition in no running
// instance's share is not consumed (its messages wait in its queue), so
// for failover run two instances per share (or more): the one that
// registered first is active on the share, the others are hot standbys,
// and when it goes away RabbitMQ requeues what it had not acked and makes
// the next one active, which receives from where it stopped, in order
// (with the unacked messages delivered again first). Shares are fixed by
// configuration: the driver does not rebalance them when instances come
// and go. An instance may also open several subscriptions, one per share,
// on one Conn.
//
// Acks are per message (AckPerMessage). A delivery stays with its consumer
// until settled or the channel closes; there is no lock timeout to extend
// (LockTimeout 0, LockExtendable false), other than RabbitMQ's
// consumer_timeout (30 minutes by default), which closes the channel.
// Prefetch (basic.qos per consumer) is what Subscription.Run asks for
// through driver.Prefetcher: RunOptions.MaxOutstanding, by default twice
// RunOptions.Concurrency, on every channel the consumer opens (after a
// reconnect too); 2 for a subscription read with Receive alone. An explicit
// SubscriptionOptions.Prefetch wins. It bounds what the client buffers, per
// queue.
//
// Delivery count: Attempt is 1 + the quorum queue's x-delivery-count
// (absent on a first delivery), plus the deliveries a message had before a
// delayed nack (carried in the wary-prior-attempts header). Nack without a
// delay is basic.reject with requeue, one message at a time (multi-message
// nacks do not count toward the limit on newer servers).
//
// Delivery limit: Topology.DeliveryLimit N declares x-delivery-limit N-1
// (RabbitMQ dead-letters when the count exceeds the limit, so N deliveries
// in all) and LimitNative. The driver applies the same limit to messages
// that came back through a delay queue, whose broker count started again.
// The dead-letter reason is delivery_limit. Past the limit of a queue
// without a dead-letter exchange RabbitMQ drops the message, so a
// DeliveryLimit without one (SubscriptionOptions.DeadLetterExchange,
// Topology.DeadLetter) fails OpenSubscription, OpenTopic and Declare with
// ErrInvalid, as Kafka's DeliveryLimit without a DeadLetterTopic does.
//
// From RabbitMQ 4.0, quorum queues declared without x-delivery-limit have
// a default limit of 20 (21 deliveries in Attempt's count). Dial reads the
// server's version (Conn.ServerVersion; an unreadable one counts as 4.x),
// and DeliveryLimit 0 means the server's default: none before 4.0; from
// 4.0, a declared limit of 21, LimitNative, which without a dead-letter
// exchange is refused as above. A queue meant to have no limit on 4.x is
// declared with x-delivery-limit -1: Topology does so for
// DeliveryLimit NoDeliveryLimit, and for its dead-letter queue (open it
// with Topology.DeadLetterSubscriptionOptions); subscriptions of such a
// queue say NoDeliveryLimit. A topic only describes its subscriptions: it
// declares the server's default but refuses only a DeliveryLimit set
// without DeadLetter.
//
// Redelivery horizon: unbounded (broker.HorizonUnbounded). A quorum queue
// keeps a message until it is acked, however long a consumer holds it
// unsettled or how often it is requeued, and each delayed nack parks it
// for up to MaxNackDelay (24h) in a delay queue; no span after its first
// delivery bounds when a copy may arrive again. An inbox (package idem) in
// front of a RabbitMQ subscription must keep its records accordingly.
//
// Dead letters: Delivery.DeadLetter publishes a copy, with the reason in
// the wary-dead-letter-reason header, to the dead-letter exchange
// (SubscriptionOptions.DeadLetterExchange), waits for its confirm, then
// acks the original (AMQP 0-9-1's reject carries no reason). A crash
// between the two leaves a duplicate in the dead-letter queue, never a
// loss. Messages read from any queue carry wary-dead-letter-reason: ours,
// or RabbitMQ's latest x-death reason (delivery_limit, rejected, expired,
// maxlen).
//
// Nack with a delay (SubscriptionOptions.NackDelay): the message is
// published, with confirm, to a delay queue next to its queue, named
// "<queue>.delay.<ms>ms", with x-message-ttl the delay rounded up to one of
// a fixed ladder (25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s, 10s, 30s,
// 1m, 2m, 5m, 10m, 30m, 1h, 3h, 6h, 12h, 24h), then the original is acked.
// When the TTL passes RabbitMQ dead-letters it through the default
// exchange back to its queue, at the tail (so a retried message loses its
// place in the order). RabbitMQ expires messages only at the head of a
// queue, hence one queue per delay. Delay queues are classic durable
// queues that delete themselves after a day unused; Topology.Delete removes
// them.
//
// Reconnection: a Conn redials with backoff when its connection drops.
// Publishes in flight fail with ErrMaybeSent; the next publish opens a new
// channel, waiting up to ConnOptions.ReadyTimeout for the connection. A
// subscription whose channel closed returns one ErrRetryable error from
// Receive (Run retries it) and resumes on a new channel; deliveries of the
// old channel were requeued by RabbitMQ, and settling them fails with
// ErrLockLost.
//
// # As
//
// Topic.As accepts **rabbit.Conn and **amqp091.Connection (the current
// connection; nil while reconnecting). Subscription.As accepts those and
// **amqp091.Channel (the consumer's current channel). Message.As, on
// received messages, accepts **amqp091.Delivery. ErrorAs accepts
// **amqp091.Error and *amqp091.Return (for an unroutable message).
//
// # Errors
//
// RabbitMQ's reply codes map to classes: 404 NOT_FOUND and 312 NO_ROUTE to
// ErrNotFound, 403 ACCESS_REFUSED and 530 NOT_ALLOWED to ErrPermission,
// 311 and a 406 about the message size to ErrTooLarge, other 406
// PRECONDITION_FAILED (a declaration that disagrees with the queue) to
// ErrInvalid, connection and channel failures (and network errors) to
// ErrRetryable. A basic.nack on publish matches ErrRetryable and
// ErrMaybeSent. Settling a delivery whose channel is gone, or that was
// settled, matches ErrLockLost. Errors from Dial, OpenTopic and
// OpenSubscription match the same classes: a login RabbitMQ refuses is
// ErrPermission on every path.
package rabbit
