// Package rabbit is wary's RabbitMQ driver, on github.com/rabbitmq/amqp091-go.
//
// Open a Conn with Dial (it reconnects by itself), then topics with
// OpenTopic (publishing to an exchange), subscriptions with
// OpenSubscription (consuming a queue) and OpenDeadLetters (reading a
// dead-letter queue). Each takes the caller's context first, which bounds
// what it does on the connection (checking, reading the management API),
// then the Conn, the Topology and the options. A Topology is the one
// description of the server side (the exchange and queues, partitions,
// delivery limit, dead-letter exchange and queue, size limit): Declare
// creates it (an exchange, a quorum queue with a single active consumer,
// or one per partition, and a dead-letter exchange and queue; existing
// topology is used as it is), the constructors use it, and PlanTopologyURL
// plans it from a URL. Many topics and subscriptions share one Conn.
//
//	top := rabbit.Topology{Exchange: "orders", Queue: "orders.billing", DeliveryLimit: 5, DeadLetter: true}
//	err := rabbit.Declare(ctx, conn, top)
//	topic, err := rabbit.OpenTopic(ctx, conn, top, nil)
//	sub, err := rabbit.OpenSubscription(ctx, conn, top, &rabbit.SubscriptionOptions{NackDelay: true})
//	dlq, err := rabbit.OpenDeadLetters(ctx, conn, top, nil)
//
// Options hold only what the client does: TopicOptions and
// SubscriptionOptions embed the portable broker.TopicOptions and
// broker.SubscriptionOptions (publish retries, logger), as every driver's
// do, with the routing key, prefetch, share of partitions, nack delays and
// the management API's address.
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
// with itself. broker.OpenDeadLetters on a subscription's URL opens its
// dead-letter queue, Topology's QUEUE.dlq, or the one the URL's
// dead_letter_queue names (see URLOpener.OpenDeadLettersURL), with a
// prefetch of 1000 unless the URL states one, since a reader that lists
// dead letters holds them all. AMQP 0-9-1 has no peek: such a reader's
// Nack, and its Close, put messages back by cancelling the consumer and
// sending basic.nack with requeue, which counts once toward a quorum
// queue's delivery limit before RabbitMQ 4.3 and not at all from 4.3 (a
// release; basic.reject and a channel closing on what it holds count);
// the dead-letter queue Declare makes has no delivery limit anyway.
// Parameters are those of Topology, TopicOptions and
// SubscriptionOptions in snake case (see URLOpener); amqp091-go's own URI
// parameters (heartbeat, connection_timeout, ...) pass through to the
// connection; any other parameter, or a value of the wrong type, is an
// error matching broker.ErrInvalid (which does not repeat the value).
// Passwords never appear in errors, logs or fmt's output (Conn and
// URLOpener have String and GoString): the package prints server URLs
// through redact.URL, never amqp091-go's URI.String, which includes the
// password. An amqp:// URL whose password is ambiguous (the opaque form
// amqp:user:pass@host, or a "/", "?" or "#" in the password that was not
// percent-encoded, which leaves an "@" outside the userinfo) fails with
// ErrInvalid, showing only its scheme; so does a rabbit:// URL with a user
// or password (its server comes from WARY_RABBIT_URL).
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
// dedup: DedupWindow is 0, consumers need an inbox (package idem). A
// batch's messages go out in as few writes as fit 64 KiB each, not one
// per message; other channels' frames on the same connection (acks of a
// subscription sharing the Conn) wait behind the batch meanwhile.
//
// Header budget: AMQP 0-9-1 sends a message's properties and headers in
// one frame, bounded by the connection's negotiated frame_max (Conn.FrameMax,
// 128 KiB by default), and RabbitMQ answers a larger one by closing the
// whole connection: every channel on it, and the lock of every unsettled
// delivery. capability.Topic.MaxHeaderSize is frame_max less 4 KiB (the frame's
// fixed parts, the properties the driver sets or copies, and its own
// headers), which broker.Topic.Publish checks header names and values against;
// every publish then computes the exact encoded size of the content header
// (each header's encoding, the key when it travels in wary-key) and refuses
// a message that does not fit with ErrTooLarge and ErrNotSent, before
// sending any of the batch. A delayed nack or dead-letter of a delivery
// whose own headers leave no room for the driver's (only another producer
// can send one) falls back to a plain requeue, or to a reject without
// requeue, which RabbitMQ dead-letters through the queue's own
// x-dead-letter-exchange (reason rejected). Dead-letter reasons are at
// most 1 KiB (driver.MaxReasonLen: Delivery.DeadLetter bounds them).
//
// Ordering, in two modes:
//
//   - One queue with x-single-active-consumer (Topology.Partitions 0):
//     scope queue. Whatever the number of subscriptions, one consumer
//     receives at a time, in queue order; the next takes over when it goes
//     away. capability.Subscription.Ordering is OrderQueue.
//   - Partitioned (Partitions N > 1): N quorum queues bound to a direct
//     exchange by the keys "0".."N-1"; the topic picks the partition as
//     FNV-1a(Key) mod N (FNV-1a of the ID without a key), and each queue
//     has its own single active consumer: order per key across consumers.
//     capability.Subscription.Ordering is OrderPartition (whatever share a
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
// Acks are per message (AckPerMessage). Many acked at once with
// broker.AckAll (as Run groups the acks of concurrent handlers, and package
// idem those of a grouped transaction, idem.Options.Batch) go as one
// basic.ack with multiple=true up to the highest tag below which every
// delivery of the channel still unsettled is among them, and single acks
// for the rest, so that no delivery the caller did not name is ever
// acknowledged. A delivery stays with its consumer
// until settled or the channel closes, and RabbitMQ closes (with
// PRECONDITION_FAILED) the channel of a consumer that holds a delivery
// unacknowledged longer than consumer_timeout, requeuing the delivery, so
// that a handler running longer sees its message delivered again.
// consumer_timeout is a server-wide setting (30 minutes by default) that
// neither AMQP nor the management API shows: every subscription states
// the lock as unread (Source.Unread, SettingLockTimeout; LockTimeout 0
// and LockExtendable false are what the fields hold for it, nothing
// extends it), with where to look the value up on the server. From
// RabbitMQ 3.12 a queue can have a timeout of its own (x-consumer-timeout,
// or a consumer-timeout policy); the driver names a queue's
// x-consumer-timeout, read through the management API, in why the lock is
// unread (RabbitMQ 3.10 accepts the argument and ignores it), and does not
// take it as the lock.
// Prefetch (basic.qos per consumer) is what Subscription.Run asks for
// through driver.Prefetcher: RunOptions.MaxOutstanding, by default twice
// RunOptions.Concurrency, on every channel the consumer opens (after a
// reconnect too); 2 for a subscription read with Receive alone. An explicit
// SubscriptionOptions.Prefetch wins. It bounds what the client buffers, per
// queue.
//
// Delivery count: Attempt is 1 + the quorum queue's x-delivery-count on a
// redelivery, plus the deliveries a message had before a delayed nack
// (carried in the wary-prior-attempts header); see Trusted headers. Nack without a
// delay is basic.reject with requeue, one message at a time (multi-message
// nacks do not count toward the limit on newer servers).
//
// Delivery limit: Topology.DeliveryLimit N declares x-delivery-limit N-1
// (RabbitMQ dead-letters when the count exceeds the limit, so N deliveries
// in all) and LimitNative. The driver applies the same limit to messages
// that came back through a delay queue, whose broker count started again.
// The dead-letter reason is delivery_limit. Past the limit of a queue
// without a dead-letter exchange RabbitMQ drops the message, so a
// DeliveryLimit without one (Topology.DeadLetter or
// DeadLetterExchangeName, or, for OpenSubscription, one the queue holds as
// read from the broker) fails OpenSubscription and Declare with
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
// with OpenDeadLetters); subscriptions of such a
// queue say NoDeliveryLimit. A topic declares none of this: the delivery
// limit, dead letters and nack delays are the subscription's capabilities
// (the queue's), and a topic's are the publisher's (key, sizes).
//
// Redelivery horizon: unbounded (capability.HorizonUnbounded). A quorum queue
// keeps a message until it is acked, however long a consumer holds it
// unsettled or how often it is requeued, and each delayed nack parks it
// for up to MaxNackDelay (24h) in a delay queue; no span after its first
// delivery bounds when a copy may arrive again. An inbox (package idem) in
// front of a RabbitMQ subscription must keep its records accordingly.
//
// Dead letters: Delivery.DeadLetter publishes a copy, with the reason in
// the wary-dead-letter-reason header, to the dead-letter exchange
// (Topology.DeadLetterExchange), waits for its confirm, then
// acks the original (AMQP 0-9-1's reject carries no reason). A crash
// between the two leaves a duplicate in the dead-letter queue, never a
// loss. Messages read from a dead-letter queue opened with
// Topology.DeadLettersFrom (OpenDeadLetters sets it) carry wary-dead-letter-reason: ours, or RabbitMQ's latest x-death
// reason (delivery_limit, rejected, expired, maxlen).
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
// # Trusted headers
//
// Anyone allowed to publish to an exchange can set any header, so the
// driver reads its own bookkeeping only from signals RabbitMQ or wary set,
// and drops every other reserved header (wary-..., except the
// event-identity ones such as broker.HeaderAggregateID) and RabbitMQ's
// (x-delivery-count, x-death, x-first-death-*, x-last-death-*) from
// Message.Headers:
//
//   - x-delivery-count counts only on a redelivery (the AMQP redelivered
//     flag, which only the broker sets; a quorum queue overwrites a
//     producer's x-delivery-count on every delivery), and there as at
//     least 1; a first delivery is attempt 1 whatever its headers say.
//   - wary-prior-attempts counts only on a message back from one of its
//     queue's own delay queues (through the default exchange, routed to
//     the queue, its latest x-death an expiry in "<queue>.delay.<n>ms"),
//     or on one that reached a dead-letter queue through the exchange
//     named by DeadLettersFrom.
//   - A dead-letter reason is reported only on a message that reached the
//     queue through DeadLettersFrom.
//   - On a partitioned queue, wary-key is the key only if it hashes to the
//     queue's partition (otherwise the message has no key), so that no
//     producer can put a key in another partition's order. On one queue,
//     the key is the producer's choice anyway (the routing key, or
//     wary-key when set). A key that is not valid UTF-8 is dropped.
//   - Every count is bounded (at most 2^20), so Attempt cannot overflow or
//     go negative.
//
// Routes and exchanges are what RabbitMQ's permissions protect: a producer
// allowed to write to the default exchange (amq.default) can send a message
// that looks like one back from a delay queue, and one allowed to write to
// a dead-letter exchange a dead letter. Give other producers write
// permission on their exchanges only.
//
// # Reading the broker
//
// A subscription reads what RabbitMQ holds for its queues when it opens,
// and its capabilities (capability.Subscription.Source) state that, not
// what the URL or SubscriptionOptions say:
//
//   - Through the management HTTP API (the rabbitmq_management plugin):
//     GET /api/queues/VHOST/QUEUE for the queue's type and arguments, and
//     the policy and operator policy that apply to it, from
//     /api/policies/VHOST and /api/operator-policies/VHOST (the highest
//     priority matching one of each; the queue's own
//     effective_policy_definition when the user may not list policies,
//     which takes the policymaker tag). The address is the management URL
//     parameter (SubscriptionOptions.Management: http[s]://HOST:PORT, with
//     a user and password of its own or the server URL's), by default
//     http://HOST:15672 of the server URL (https://HOST:15671 for amqps)
//     with its user and password; management=off skips it. Each request
//     has a 3 s timeout; the password appears in no error or text.
//   - The delivery limit as RabbitMQ applies it (rabbit_quorum_queue):
//     the smaller of x-delivery-limit and a delivery-limit policy, the
//     larger when either is negative (which lifts the limit), the server's
//     default when neither is set (20 from RabbitMQ 4.0, none before), in
//     deliveries: the value + 1. The dead-letter exchange: the argument
//     over a policy. A queue without x-single-active-consumer keeps no
//     order among its consumers (OrderNone): an argument the API shows
//     in full, so absent is off even where policies cannot be listed; a
//     classic queue has no delivery limit nor count. A max-length with
//     overflow drop-head (or reject-publish-dlx) is named in Source.Read.
//   - Without the management API, over AMQP: the driver redeclares the
//     queue (which exists: it was checked passively first) on a throwaway
//     channel with the arguments the options state; RabbitMQ answers 406
//     PRECONDITION_FAILED naming one argument that differs and its value,
//     which the next attempt takes, until the declaration succeeds with
//     the queue's own arguments (which changes nothing). So the queue's
//     x-dead-letter-exchange, which overrules a policy, is read, and a URL
//     that states another is a conflict, as through the management API.
//     Policies are not visible over AMQP, so the delivery limit is Unread
//     even where x-delivery-limit is read (a delivery-limit policy applies
//     over it when lower, and lifts it when negative; the capabilities
//     hold the argument's limit, which the subscription counts with, and
//     a URL that states another is no conflict), and so are a dead-letter
//     exchange without an argument and the queue length, with why and how
//     to read them (enable the plugin, or pass management=URL). RabbitMQ
//     does not compare x-single-active-consumer on a redeclaration, so
//     whether a queue has one is not read: the order is Unread
//     (SettingOrdering), and Ordering is OrderNone, what a consumer may
//     rely on, which wary explain states as unknown, not as none.
//   - The lock's bound, RabbitMQ's consumer_timeout, is unread through
//     either interface (see the acks above).
//
// Where the URL or options state a delivery_limit or dead_letter_exchange
// other than the broker holds, Source.Conflicts says so (wary explain
// flags it) and the broker's value applies: the capabilities hold it, the
// driver applies it to messages back from delay queues, and
// Delivery.DeadLetter publishes to the queue's own dead-letter exchange.
// Partition queues that hold different values leave the setting Unread.
// A delivery limit in the options without a dead-letter exchange is
// refused unless the broker holds one the options do not name (a
// delivery_limit URL parameter without dead_letter_exchange on a queue
// whose x-dead-letter-exchange or policy gives one opens, and dead-letters
// there); the server's default limit without one is refused only when the
// broker's limit could not be read. A queue read from the broker that
// drops messages past its limit (no dead-letter exchange) opens when the
// options state no limit, and its capabilities say so (DeadLetter false). The topic reads
// nothing: its capabilities are the publisher's (key, sizes).
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
// 311 and a 406 about the message size to ErrTooLarge (as is a message
// whose content header would exceed frame_max, refused before sending), other 406
// PRECONDITION_FAILED (a declaration that disagrees with the queue) to
// ErrInvalid, connection and channel failures (and network errors) to
// ErrRetryable. A basic.nack on publish matches ErrRetryable and
// ErrMaybeSent. Settling a delivery whose channel is gone, or that was
// settled, matches ErrLockLost. Errors from Dial, OpenTopic and
// OpenSubscription match the same classes: a login RabbitMQ refuses is
// ErrPermission on every path.
package rabbit
