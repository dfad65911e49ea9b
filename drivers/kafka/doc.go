// Package kafka is the wary driver for Apache Kafka, on franz-go (kgo).
//
// Every constructor takes the same things in the same order: the caller's
// context, which bounds the open's metadata and config look-ups (the
// driver sets no timeout of its own), the program's client, the names
// (the topic, then the consumer group that is the subscription), and the
// options, whose portable part is the embedded broker.TopicOptions or
// broker.SubscriptionOptions. The clients are the program's: it builds
// them with kgo, and closes them after the topics and subscriptions on
// them. What kgo only takes when it builds a client comes from the
// driver, as kgo options the program passes first, followed by its own
// (seeds, TLS, SASL, any other kgo option), which may override the
// defaults among them:
//
//	seeds := kgo.SeedBrokers("localhost:9092")
//	pcl, err := kgo.NewClient(append(kafka.TopicOpts(), seeds)...)
//	orders, err := kafka.OpenTopic(ctx, pcl, "orders", nil)
//	ccl, err := kgo.NewClient(append(kafka.SubscriptionOpts("billing"), seeds)...)
//	sub, err := kafka.OpenSubscription(ctx, ccl, "orders", "billing",
//		&kafka.SubscriptionOptions{Ordered: true, DeadLetterTopic: "orders.dlq", DeliveryLimit: 5})
//	dcl, err := kgo.NewClient(append(kafka.SubscriptionOpts("billing.dead-letters"), seeds)...)
//	dl, err := kafka.OpenDeadLetters(ctx, dcl, "orders.dlq", "billing.dead-letters", nil)
//
// A topic publishes through any client that writes idempotently with acks
// from all in-sync replicas (kgo's defaults), and several topics may share
// one; TopicOpts adds per-topic batch sizes and an immediate error on a
// rejected SASL login. A subscription needs a client built with
// SubscriptionOpts for its group (the group, manual commits and the
// rebalance callbacks are fixed when kgo builds a client); the client
// serves that one subscription, which adds its topics to it when it opens
// and leaves the group when it closes. A client built otherwise is an
// error matching broker.ErrInvalid that carries a *ClientError saying
// what is missing. As(**kgo.Client) reaches the client. The URL opener is
// the one place the driver builds clients: one per topic or subscription,
// closed with it.
//
// # URLs
//
// Importing the package registers the scheme "kafka" on
// broker.DefaultURLMux:
//
//	kafka://orders?brokers=host1:9092,host2:9092                       (topic)
//	kafka://billing?topic=orders&brokers=host1:9092&ordered=true       (subscription of group billing)
//
// The host is the one name (the topic, or the group); a path (kafka://a/b),
// a fragment or userinfo is an error matching broker.ErrInvalid:
// credentials go in URLOpener.ClientOpts. Topic names (in the URL or the
// options) must be valid Kafka topic names, checked at open.
// brokers defaults to the environment variable KAFKA_BROKERS. Both take
// skip_check (a boolean, as SkipCheck). Subscription URLs also take
// ordered (a boolean), dead_letter_topic, dead_letters (a boolean: the
// topic is read as OpenDeadLetters reads it), delivery_limit (an integer), retry_topic and commit_interval (a Go duration, at most 1h), as in
// SubscriptionOptions. Any other parameter, and a malformed or
// out-of-range value, is an error matching broker.ErrInvalid that names
// the parameter and never echoes its value (nor any other's). URLOpener.ClientOpts are the
// kgo options of every client the opener builds. broker.OpenDeadLetters on
// a subscription's URL reads its dead_letter_topic as the group
// GROUP.dead-letters (see URLOpener.OpenDeadLettersURL).
//
// # Delivery semantics
//
// Publishing: Message.Key is the record key (the default partitioner
// hashes it to a partition; an empty key spreads records), Message.ID travels
// in the header "wary-id", headers as record headers. The client must use
// idempotent writes and acks from all in-sync replicas (kgo's defaults;
// OpenTopic refuses a client without them), so Publish returns once
// every in-sync replica has the records. The driver does not retry; kgo retries
// inside its idempotent producer session, where the broker drops the
// copies. If ctx ends while records are in flight, Publish returns an
// error matching broker.ErrMaybeSent (kgo does not abandon an idempotent
// record in flight: it may still be written).
//
// Scope: order per partition (capability.Subscription.Ordering is OrderPartition; the
// key chooses the partition). Partitions are consumed concurrently. With
// SubscriptionOptions.Ordered the next record of a partition is not handed
// out before the previous one is settled (HeadOfLine); without it the
// records of a partition are handed out in order without waiting, and may
// be processed concurrently.
//
// Ack model: cumulative (AckCumulative). The driver commits, per partition,
// the offset of the first record not yet settled: the contiguous settled
// prefix, never past an unsettled record. A consumer that crashes or closes
// redelivers (through the group's next owner of the partition) every record
// after that point, acked or not. By default Ack returns after the broker
// confirmed the commit that covers it (concurrent acks share one commit,
// and broker.AckAll makes one commit for all its acks: the acks Run groups,
// or those of one of package idem's grouped transactions,
// idem.Options.Batch); with CommitInterval, Ack returns at once and the
// commit follows within the interval, on revoke and on Close.
//
// Rebalances: on revoke the driver stops handing out the partition's
// records, waits up to RevokeTimeout for its deliveries in flight to be
// settled, commits the settled prefix and gives the partition up; a later
// settle of one of its deliveries fails with broker.ErrLockLost. On a lost
// partition (the member was fenced) nothing is committed. Every commit
// carries in its metadata the highest offset handed out, so the next owner
// flags the records up to it as Redelivered (Attempt 2).
//
// Data loss: when kgo reports that the broker lost records this member had
// consumed (kgo.ErrDataLoss, after an unclean leader election, or when the
// new leader cannot say where its log and the consumed one diverge), it
// has already moved the partition back, to where the logs agree or to the
// reset offset (the start of the partition), and reads it again from
// there. The subscription logs a warning and goes on: the records from
// that point are delivered again (flagged as redeliveries), the
// deliveries of records at or after it that were handed out before become
// stale (a settle fails with broker.ErrLockLost, as after a revoke), the
// records below it stay as they were, and the next commit moves the
// committed offset back to the new commit point. An inbox absorbs the
// copies.
//
// Nack: there is no per-record nack in Kafka. Without RetryTopic the record
// stays in the consumer and is handed out again after the delay, while the
// partition's commit stays before it (a pause-and-seek-back that needs no
// refetch); with Ordered the partition waits for it (head-of-line). With
// RetryTopic the driver writes a copy to that topic, carrying the next
// delivery number (header "wary-attempt") and the time it is due
// ("wary-not-before"), then commits past the original; the subscription
// consumes the retry topic too and holds each copy until it is due. A nack
// delay over SubscriptionOptions.MaxNackDelay (default 24h) is refused.
//
// Retry headers are trusted only as far as the driver could have written
// them: on the subscription's topic they are ignored (any producer may set
// them), and on the retry topic (which other producers may write too) the
// delivery number is bounded by the delivery limit and the due time by
// MaxNackDelay from the fetch. They never reach Message.Headers.
//
// Delivery count and limit: Kafka keeps no count, so the library does
// (DeliveryLimitMode LimitEmulated). The count lives in the consumer's
// memory (and in retry-topic headers): a partition handed over by a
// rebalance or a close restarts it at 2 for records the previous owner
// handed out, and a crash loses the records handed out since the last
// commit. capability.Subscription.DeliveryCount is therefore false. Once a delivery
// numbered DeliveryLimit or more is nacked, the record is written to
// DeadLetterTopic instead, with the reason in driver.HeaderDeadLetterReason
// and its origin ("topic/partition@offset") in HeaderDeadLetterSource.
// DeadLetter does the same on demand. A dead-letter topic is read with
// OpenDeadLetters (URL parameter dead_letters=true, or
// broker.OpenDeadLetters on the consumer's own URL), which reports those
// two headers; any other
// subscription drops them, and every reserved (wary-...) header the driver
// does not read, since another producer could have written them.
//
// No lock timeout (LockTimeout 0): a record is held until it is settled or
// its partition is revoked; ExtendLock is not supported. No broker dedup
// (DedupWindow 0): the idempotent producer only drops its own retries, so
// consumers recognise copies by Message.ID (package idem).
//
// Size: MaxMessageSize is the smaller of the topic's max.message.bytes and
// the client's ProducerBatchMaxBytes, less 1 KiB, counted as the portable
// layer counts (body, ID, key, header names and values). Publish then
// checks the record's exact encoded size (each header costs two varint
// lengths; the batch header, the ID header) with room for what a retry or
// dead-letter copy adds, and refuses an excess with broker.ErrTooLarge
// (ErrNotSent) before producing: a message with many small headers may be
// refused below MaxMessageSize, and a published message can always be
// retried and dead-lettered (reasons are cut to 512 bytes). Kafka has no
// separate header limit (MaxHeaderSize 0). A client built with TopicOpts
// or SubscriptionOpts fills a record batch for a topic only up to the
// topic's max.message.bytes, read at open (kgo would fill it up to
// ProducerBatchMaxBytes, and the broker refuse the whole batch);
// kgo.ProducerBatchMaxBytes after them overrides it.
//
// Redelivery horizon: a consumer whose committed offset is lost or reset
// (an expired group, a rewind) reads again every record still in the log,
// so the horizon is how long a record stays there, read from the topic's
// configs at open. With cleanup.policy delete it is retention.ms plus
// segment.ms plus 5 minutes: Kafka deletes whole segments once their
// newest record is past retention.ms, a segment takes records for up to
// segment.ms, and the broker looks for expired segments every
// log.retention.check.interval.ms (a broker setting the driver cannot
// read; 5 minutes by default). Kafka's defaults give 7 + 7 days and 5
// minutes. With retention.ms=-1, or cleanup.policy compact without delete
// (the last record of every key is kept), it is HorizonUnbounded. With a
// RetryTopic it is the larger of the two topics'. Where the configs were
// not read (SkipCheck, or a principal without DescribeConfigs on the
// topic) it is HorizonUnknown: the driver does not guess, and an inbox
// then needs an explicit retention.
//
// Failover: a member that dies without leaving the group (a crash, a kill,
// a partition of the network) keeps its partitions, idle, until its
// session times out; a member that closes leaves at once. kgo's default
// session timeout is 45s. The driver's group clients default to
// DefaultSessionTimeout (10s) with a heartbeat every
// DefaultHeartbeatInterval (1s): with the effects in an inbox, the
// duplicates a spurious expiry causes are absorbed, so a faster failover
// is worth more. The broker must allow it (group.min.session.timeout.ms,
// 6s by default); kgo.SessionTimeout and kgo.HeartbeatInterval after
// SubscriptionOpts override it.
//
// Capabilities by side: a topic declares what a producer is promised (the
// record key, the size limit); Kafka's delivery promises (order as
// delivered, the delivery limit, dead letters, the redelivery horizon of
// the topic and its retry topic) are made by the consumer, and its
// subscription declares them.
//
// # What is read from the broker
//
// At open the driver reads, with kadm, each topic's metadata (Metadata:
// it exists, with its partitions) and its configs (DescribeTopicConfigs:
// max.message.bytes, retention.ms, segment.ms, cleanup.policy), and the
// capabilities' Source.Read says so ("topic orders's partitions and
// configs (kadm Metadata, DescribeTopicConfigs)"); a subscription reads
// its retry topic's too, and looks up its dead-letter topic, whose absence
// fails the open with broker.ErrNotFound. What it cannot read is listed
// in Source.Unread, which wary explain states as unknown with the fix:
//
//   - A principal without DescribeConfigs on a topic: the open succeeds;
//     the subscription's redelivery horizon (HorizonUnknown) and the
//     topic's max message size (Kafka's default max.message.bytes) are
//     unread. To read them, grant DescribeConfigs on the topic.
//   - Configs without a readable retention.ms and segment.ms: the horizon
//     is unread; set them on the topic.
//   - SkipCheck (skip_check in the URL): nothing is read; the horizon, the
//     max message size and, with a DeadLetterTopic, the dead-letter
//     topic's existence are unread. Open without SkipCheck to read them.
//
// The delivery limit and the dead-letter topic are the driver's own
// (SubscriptionOptions.DeliveryLimit, DeadLetterTopic), not settings a
// broker holds: they are never unread, and the URL states nothing a
// broker holds that could contradict it.
//
// # Transactions
//
// OpenTransactSession gives a consume-transform-produce loop with
// exactly-once effect inside Kafka (kgo's GroupTransactSession):
//
//	sess, err := kgo.NewGroupTransactSession(append(kafka.TransactOpts("enricher"), seeds, kgo.TransactionalID("enricher-1"))...)
//	s, err := kafka.OpenTransactSession(ctx, sess, "orders", "enricher", nil)
//	err = s.Run(ctx, func(ctx context.Context, tx *kafka.Tx) error {
//		for _, m := range tx.Messages {
//			if err := tx.Publish("orders.enriched", enrich(m.Message)); err != nil {
//				return err
//			}
//		}
//		return nil
//	})
//
// Each batch of consumed records (up to TransactOptions.MaxBatch) is one
// transaction: the records the handler publishes with Tx.Publish and the
// consumed records' offsets commit atomically, or not at all. A handler
// error or panic, a failed produce, a refused offset commit or a rebalance
// during the transaction aborts it; the aborted batch is consumed again
// (TxMessage.Attempt counts, in memory, as for subscriptions).
//
// What it covers: Kafka to Kafka, read under read_committed. Every input
// record consumed through the group yields its output exactly once for
// readers in read_committed isolation, across aborts, crashes (an open
// transaction is fenced by the next holder of the TransactionalID, or
// aborted by the broker after the transaction timeout) and rebalances
// (KIP-447: a new owner's offset fetch waits for the pending transaction).
// Subscriptions of this package read committed by default; the session
// itself always does, so chained sessions stay exactly-once.
//
// What it does not cover: anything outside Kafka. A write to a database,
// a call to a service or a message to another broker made by the handler
// is not part of the transaction: an aborted transaction leaves it done,
// and the redelivered batch does it again. For such an effect use a
// Subscription with the inbox of package idem (the effect and the inbox
// record commit in the database's transaction). Readers in
// read_uncommitted isolation (kgo's default, and the Java client's) see
// the records of aborted transactions too, so they get duplicates. The
// handler's input is the batch, so a record on which the handler always
// fails stops its partition; publish it to a dead-letter topic inside the
// transaction instead of failing. Message.ID does not change what Kafka
// does: outputs keep the IDs the handler gives them, for an inbox
// downstream.
//
// # As targets
//
// Topic.As and Subscription.As accept **kgo.Client: the topic's client, or
// the subscription's consumer-group client (use it for metrics or admin
// requests). TransactSession.As accepts it too, for the session's. Message.As on a received
// message accepts **kgo.Record. ErrorAs reaches any error in the chain,
// for example **kerr.Error.
//
// # Errors
//
// The constructors' errors are *broker.Error (Op "open"), classified as
// below. A rejected SASL login matches broker.ErrPermission and says that
// authentication failed (whether the broker answered
// SASL_AUTHENTICATION_FAILED or closed the connection, which kgo reports
// as a bare EOF); no error holds the credentials.
//
// UNKNOWN_TOPIC_OR_PARTITION matches broker.ErrNotFound (OpenTopic,
// OpenSubscription and OpenDeadLetters check that the topics exist,
// unless SkipCheck; a principal not allowed to read a topic's configs opens it anyway, with an
// unknown horizon), kgo options the client refuses, and inconsistent
// options, broker.ErrInvalid, MESSAGE_TOO_LARGE
// broker.ErrTooLarge, authorization failures broker.ErrPermission,
// retriable Kafka errors and network errors broker.ErrRetryable. A produce
// error is ErrNotSent only when the broker rejected the records before the
// append (too large, unknown topic, invalid, unauthorised); everything else,
// timeouts included, is ErrMaybeSent. A settle of a delivery whose partition
// was revoked, or a commit refused because the member left the group
// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), matches broker.ErrLockLost.
package kafka
