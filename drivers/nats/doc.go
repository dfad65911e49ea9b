// Package nats is the wary driver for NATS JetStream, on nats.go and its
// jetstream package.
//
// Constructors take the caller's context first, which bounds the
// requests of the open (the driver sets no timeout of its own), then the
// caller's jetstream.JetStream, the stream (and, for a subscription, its
// durable pull consumer), and the options last, whose portable part is
// the embedded broker.TopicOptions or broker.SubscriptionOptions:
//
//	nc, err := natsgo.Connect("nats://127.0.0.1:4222") // natsgo "github.com/nats-io/nats.go"
//	js, err := jetstream.New(nc)
//	orders, err := nats.OpenTopic(ctx, js, "ORDERS", nil)
//	sub, err := nats.OpenSubscription(ctx, js, "ORDERS", "billing", nil)
//	dead, err := nats.OpenDeadLetters(ctx, js, "ORDERS", "billing", nil)
//
// The connection stays the caller's: Close closes nothing of it. The
// stream and the consumer must exist (ErrNotFound otherwise): Declare, or
// `wary topology --apply` on a URL, creates them, as the nats CLI does.
//
// # URLs
//
// Importing the package registers the scheme "nats" on
// broker.DefaultURLMux:
//
//	nats://127.0.0.1:4222/ORDERS                           (a topic)
//	nats://127.0.0.1:4222/ORDERS?consumer=billing          (a subscription)
//	nats://user:password@host:4222/ORDERS?consumer=billing&subject=orders
//
// The path is the stream. Parameters: consumer, subject, wait_time,
// dead_letter_stream, prefetch (true by default), dead_letters, and
// ack_wait, max_deliver, max_ack_pending, duplicate_window and max_age,
// which say how PlanTopologyURL declares the stream and consumer and
// which a subscription compares with the consumer's (see URLOpener). Any other
// parameter, and a malformed value, is an error matching
// broker.ErrInvalid that does not repeat the value; the password never
// appears in an error or a log. Each topic or subscription a URL opens has
// a connection of its own, closed with it.
//
// # Delivery semantics
//
// Capabilities are read, when the topic or subscription opens, from the
// live configuration of the stream (duplicate_window, max_age,
// max_msg_size, subjects), of the consumer (ack_policy, ack_wait,
// max_deliver, max_ack_pending), from whether the dead-letter stream
// exists, and from the server's max_payload; their Source says so, and
// lists where a URL states another value than the consumer holds:
//
//   - Subjects and keys: a message without a key is published to the
//     topic's subject (TopicOptions.Subject; by default the stream's first
//     subject without a trailing ".>"), one with a key to SUBJECT.KEY. A
//     key is one or more subject tokens (no whitespace, no empty token, no
//     "*" or ">" token, at most MaxKeyLen bytes); another is an error
//     matching broker.ErrInvalid, and nothing of the batch is sent. A
//     stream that captures only SUBJECT.> requires a key (KeyRequired).
//   - Publishing is a JetStream publish with Nats-Msg-Id set to
//     Message.ID and the expected stream, and returns once the server's
//     PubAck arrived for every message of the batch (published
//     asynchronously, MaxBatchSize at a time). A duplicate's PubAck (the
//     same ID inside the stream's duplicate_window, 2 minutes by default)
//     is a success: DedupWindow is duplicate_window, DedupScope the
//     stream.
//   - Order: with max_ack_pending 1 the server has one message of the
//     consumer in flight at a time, and delivers the consumer's messages
//     in stream order: Ordering is OrderQueue with HeadOfLine, for the
//     whole consumer, so for every key too. A key-scoped order with keys
//     handled in parallel is a consumer per key (or set of keys), each
//     with max_ack_pending 1 and filter_subject SUBJECT.KEY. With a larger
//     max_ack_pending, competing deliveries and redeliveries come in any
//     order: Ordering is OrderNone.
//   - Acks are per message (ack_policy explicit; none and all are refused
//     with broker.ErrInvalid), published, then one flush per call (a PING
//     the server answers after reading everything before it), so that Ack
//     and broker.AckAll return once the server has read them, and fail
//     when it did not (with the deadline's error, SettleTimeout's or the
//     caller's, or the connection's): the delivery stays unsettled and
//     comes back after ack_wait. A JetStream ack has no answer of
//     its own: an AckSync's proves no more (the server answers it for a
//     delivery whose ack_wait has passed too), and would cost a round trip
//     per message.
//   - Prefetch (on by default; SubscriptionOptions.NoPrefetch, or
//     prefetch=false, turns it off): a receive that got as many messages
//     as it asked for sends the next pull request before it returns, and
//     an ack sends one (before the acks) when none is outstanding, so
//     that the next receive finds its messages in the client instead of
//     waiting a round trip. The pull asks for the size of the last
//     receive, or, under Subscription.Run, for RunOptions.MaxOutstanding
//     (driver.Prefetcher): Run's loop and the prefetch hold at most twice
//     that. Prefetched messages are delivered (locked, counted) from that
//     pull on; a receive hands out none whose ack_wait passed before it
//     took them (the server delivers them again), and Close returns those
//     no receive took with -NAK. A consumer with max_ack_pending 1 never
//     prefetches, so its order holds, nor does OpenDeadLetters. Without
//     prefetch no pull request outlives a receive.
//   - Lock: the consumer's ack_wait is LockTimeout. ExtendLock is +WPI,
//     which JetStream applies as ack_wait from now: for a longer d the
//     driver repeats it until d has passed or the delivery is settled.
//     Nack(delay) is -NAK with the delay. A delivery whose ack_wait has
//     passed (measured from before its pull request) is settled by no
//     call: each returns broker.ErrLockLost, as the server redelivers it.
//   - Delivery count and limit: the server's delivery count is
//     Delivery.Attempt and survives consumers (LimitNative). With a
//     dead-letter stream and max_deliver N >= 2, DeliveryLimit is N-1: a
//     nack on delivery N-1 dead-letters the message, and the Nth delivery
//     (after a lock expired on delivery N-1) is dead-lettered by the
//     driver unseen, so that no message is left in the stream, never to be
//     delivered again. Without a dead-letter stream DeliveryLimit is
//     max_deliver, and JetStream stops delivering a message after it (the
//     message stays in the stream, and the server publishes the advisory
//     $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES).
//   - Dead letters: JetStream has none; the driver writes them. The
//     dead-letter stream of stream S is DeadLetterStream(S) ("S_DLQ",
//     SubscriptionOptions.DeadLetterStream), capturing
//     DeadLetterSubject(S, "*") ("wary.dlq.S.*"). DeadLetter(reason)
//     publishes a copy to wary.dlq.S.CONSUMER with the message's headers
//     and body, the headers wary-id, wary-key, wary-consumer,
//     wary-stream-seq and wary-dead-letter-reason (the reason, cut to
//     MaxReasonLen bytes), awaits its PubAck, then terminates the original
//     (+TERM). A failure between the two leaves the message in both
//     streams, never in neither: the original comes back after ack_wait,
//     and the second copy has the same Nats-Msg-Id (stream, consumer and
//     sequence), which the dead-letter stream drops inside its
//     duplicate_window. OpenDeadLetters (and broker.OpenDeadLetters on the
//     consumer's URL, and wary dlq) reads them through a durable consumer
//     of the consumer's name on the dead-letter stream, filtered to its
//     subject: each message has its ID, key, headers and body as
//     published, and its reason.
//   - Redelivery horizon: the stream's max_age, or unbounded when it has
//     none (a limits, interest or work-queue stream keeps an unacked
//     message until max_age, or for good). A stream bounded by max_msgs or
//     max_bytes with discard old drops its oldest messages, acked or not:
//     no capability field says it; size such a stream for its consumers.
//   - Size: MaxMessageSize is the lesser of the server's max_payload and
//     the stream's max_msg_size, less SizeReserve bytes for the header
//     framing, Nats-Msg-Id and what a dead-letter copy adds. NATS has no
//     separate header limit: headers count in max_payload.
//
// Headers: names hold no ':', whitespace or control character and do not
// start with "Nats-" (NATS's own, which the server acts on); values hold
// no CR or LF and no leading or trailing whitespace (NATS trims it). A
// message that breaks one is an error matching broker.ErrInvalid and
// nothing of its batch is sent. On receipt, NATS's own headers (Nats-...)
// are not shown, nor, outside OpenDeadLetters, the driver's wary-...
// headers of a dead-letter copy.
//
// # Errors
//
// A missing stream or consumer is broker.ErrNotFound; a stream that does
// not capture the topic's subject, a push consumer or one that does not
// ack explicitly are broker.ErrInvalid. A message over the size limit is
// broker.ErrTooLarge before anything is sent (as is one the server
// refuses as over max_payload or max_msg_size). A lost connection, a
// request that timed out and "no responders" are broker.ErrRetryable (a
// PubAck that did not come is ErrMaybeSent: the stream may hold the
// message, and the retry with the same Nats-Msg-Id is a duplicate it
// drops). A JetStream API error is reachable with Topic.ErrorAs or
// Subscription.ErrorAs as a *jetstream.APIError.
//
// # As
//
// Topic.As and Subscription.As accept *jetstream.JetStream, the
// connection (a **Conn of nats.go) and *Subject (the topic's subject); Subscription.As also
// *jetstream.Consumer; Message.As accepts *jetstream.Msg and *Subject (the
// message's own subject).
//
// # Telemetry
//
// Spans and metrics name the system "nats" and the stream as the
// destination (broker.Telemetry, in the options).
package nats
