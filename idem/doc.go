// Package idem is wary's safety net for consumers on at-least-once brokers:
// an inbox that makes each message's effect happen once, version checks and
// state-transition guards that keep duplicate, stale and out-of-order events
// from overwriting newer state, and a park where what cannot be applied
// waits for an operator. On the producer side, a transactional outbox with
// a relay (package idem/outbox) publishes events committed with the data;
// idempotency keys (package idem/keys) make external calls safe to retry.
//
// Package idem knows no database and no broker driver. It works on a store
// for transactions of type Tx, idem/postgres (Tx is pgx.Tx) or idem/sqlite
// (Tx is *sql.Tx), and on *broker.Delivery values from any driver. A
// handler writes through the Tx it is given, and calls the store's
// CheckVersion and Transition in it. The runnable examples that need a
// store run on PostgreSQL (Inbox.Handle) and, for the inbox's other flows
// (shared transactions, version checks) and idempotency keys, in
// idem/sqlite, whose store they run on: go mod tidy loads the tests of the
// packages a program imports, so that way a user of idem and idem/postgres
// does not download SQLite.
//
// # The inbox, and what "exactly one effect" rests on
//
// Brokers redeliver: after a lock expires, after a consumer crashes, after
// a producer retries. No broker setting prevents a second delivery, so
// Inbox.Handle makes the second delivery harmless. For each delivery it
//
//  1. begins a transaction,
//  2. claims (consumer, message ID) in the inbox table, with
//     INSERT ... ON CONFLICT DO NOTHING,
//  3. runs the handler with that same transaction, if the claim was new,
//  4. commits, and only then
//  5. acknowledges the delivery.
//
// A copy that finds the claim already committed is acknowledged without
// running the handler. Two copies processed at the same time race for the
// claim and the database decides: the second waits for the first
// transaction, then sees the claim (first committed) or takes it (first
// rolled back). A handler error (or panic) rolls back the claim together
// with the handler's writes, so the copy that comes next runs the handler
// again; the failed delivery is retried (broker.Delivery.Retry: after the
// RunOptions.Backoff of the Run that handed it out) and never acknowledged
// (an error marked with broker.Permanent is
// dead-lettered instead, where the broker can).
//
// The guarantee is exactly one committed effect per message ID and
// consumer, and it rests on three things:
//
//   - The same transaction: every effect the handler has must be a write
//     through the transaction it is given. Effects outside it (an e-mail, an
//     HTTP call, a write to another database) are at-least-once; use an
//     idempotency key or an outbox for those.
//   - Ack after commit: an acknowledgement is sent only after the commit
//     succeeded. If the process dies in between, or the ack fails, the
//     broker delivers again and the claim makes that copy a duplicate.
//     Handle reports a failed ack as ErrAckAfterCommit and counts it in
//     Stats.AckFailures.
//   - Retention covering the redelivery horizon: claims are purged after
//     Options.Retention, and a copy arriving after that would run again.
//     NewInbox reads the subscription's capability.Subscription.RedeliveryHorizon:
//     a finite horizon is the default retention, and a shorter one is
//     refused; an unbounded horizon (capability.HorizonUnbounded: the broker
//     may redeliver at any time) keeps claims for ever, and a finite
//     retention is refused; an unknown horizon (capability.HorizonUnknown)
//     has no safe default, so NewInbox requires Options.Retention.
//     Options.AllowShortRetention is the knowing override of both
//     refusals.
//
// The message ID is the producer's stable logical ID (broker.Message.ID);
// two messages with different IDs are different messages to the inbox,
// even with the same body. Events that carry an aggregate version are also
// protected across IDs by the version check below.
//
// A message that cannot be claimed is settled for good rather than
// retried for ever, so that it never stalls the messages behind it: one
// whose ID breaks driver.ValidateID's rules (empty or only white space,
// over driver.MaxIDLen bytes, not UTF-8, control characters: Publish refuses such IDs, but a
// foreign producer can still send them; ErrInvalidID), and one with a
// value the store refuses (ErrData: a NUL byte in PostgreSQL, an
// index row over its limit). It is dead-lettered with the reason where the
// broker can, and parked otherwise. Connection failures and every other
// store error stay transient: the delivery is nacked and tried again. A
// transaction that failed only because of a concurrent one (a deadlock's
// victim, on PostgreSQL; conflicts), whether in a statement of the
// inbox's or of the handler's, is tried again at once by the inbox, up to
// three times, before its deliveries are nacked; Stats.Conflicts counts
// these retries.
//
// # Handlers, and what Handle did
//
// A Handler[Tx] is the user's code, the one handler shape of this package:
// func(ctx, tx, delivery) error, writing through tx. The inbox runs it:
// Inbox.Wrap(h) is the broker.Handler to pass to Subscription.Run (the one
// handler loop; RunOptions.Middleware wraps it further), and Inbox.Handle
// handles one delivery, for those who Receive themselves. Handle returns
// a Result saying what happened (ResultApplied, ResultDuplicate,
// ResultStale, ResultGapRetried, ResultParked, ResultHeld, ResultFailed,
// ResultDeadLettered), so callers and tests need not infer it. A handler
// that finds a message stale by the state returns SkipStale: nothing is
// applied, the claim commits, Handle says ResultStale. Typed decodes each
// body into a Go value before the handler sees it; a body that does not
// decode is dead-lettered (or parked) with the reason, never retried.
//
// What an inbox does around the handler is set once, in its Options:
// version checks (Options.Versions), shared transactions (Options.Batch),
// parking (MaxAttempts, NoHold), retention. So a consumer is one line:
//
//	sub.Run(ctx, inbox.Wrap(handler), &broker.RunOptions{Concurrency: 8})
//
// With Options.Batch above 1, concurrent Handle calls share transactions:
// while one transaction is in flight the calls that arrive wait, and the
// next one claims up to Batch of them with one statement, runs each
// handler in turn, commits once and acknowledges them with one call to the
// broker (broker.AckAll). A lone call waits for nothing (it yields to the
// Go scheduler while that lets more calls join). Each delivery
// keeps its own Result; when one handler fails, the transaction is rolled
// back, that delivery is settled alone, and the rest is tried again
// without it. Stats.Commits counts the transactions. A transaction takes
// its locks in one order, the same in every transaction: its claims in
// message-ID order, then, with version checks, the locks of its events'
// aggregates in the store's order (the early events' aggregate locks), then the
// rows; so concurrent inboxes sharing aggregates do not deadlock.
//
// Claims are purged after the retention by the inbox itself, lazily, from
// Handle at most once per Options.PurgeInterval (no goroutine; see
// there), or by Inbox.Purge.
//
// # Version checks
//
// An event carries its aggregate ID and version in headers (HeaderAggregateID,
// HeaderAggregateVersion; the outbox writes them, see Event.Headers).
// Store.CheckVersion updates the consumer's state table conditionally:
//
//	UPDATE t SET version = $v WHERE id = $id AND version = $v - 1
//
// and, when no row matched, reads the current version to tell the cases
// apart: VersionStale (current >= v: a duplicate or an older event;
// acknowledge, do not apply), VersionGap (current < v-1: an earlier event
// is missing) and VersionMissing (no row). With Options.Versions naming the table, the
// inbox does this in its transaction before every handler call: an event
// to apply runs the handler (which reads it with ParseEvent); a stale one
// is skipped (ResultStale); a gap is retried with backoff
// (ResultGapRetried) and parked after Options.MaxAttempts (ResultParked).
//
// # State-transition guards
//
// Where events carry no version, the state itself can make them idempotent
// ("natural idempotency"): Store.Transition sets a target state only from
// allowed source states, and says TransitionApplied, TransitionAlready (a
// duplicate) or TransitionInvalid (a stale event, such as a cancellation
// that arrives after shipping), so a stale event never overwrites newer
// state.
//
// # Parking
//
// A handler that returns a *ParkError has its message retried with backoff
// and then parked (or parked at once, with ParkError.Now): stored with its
// reason, attempt count, first and last failure time, headers and body,
// acknowledged, and claimed in the inbox. While an aggregate has a parked
// message, its later messages are parked behind it instead of being
// applied out of order (Options.NoHold turns this off). An operator lists
// the park (Inbox.Parked), replays an aggregate in order with the handler
// the messages were parked by, behind the same version checks
// (Inbox.Replay; Inbox.ReplayAll for every
// aggregate, a page at a time), or discards messages (Inbox.Discard).
// Replayed messages reach the handler as detached deliveries
// (broker.NewDetachedDelivery).
//
// # What a pipeline guarantees
//
// Inbox.Statement and Relay.Statement state each side of the pipeline's
// end-to-end guarantee as the program built it, and NewInbox's inbox and
// Relay.Run log it once through their Logger, at Warn when something is
// misconfigured. Package idem/guarantee states a whole pipeline and
// explains each line.
//
// # Schema
//
// The stores create and migrate their tables from embedded, versioned SQL
// files, recorded in a migrations table. Table names carry a configurable
// prefix ("wary_" by default). Every name (prefix, consumer, the user's
// table and column names given to CheckVersion and Transition) is
// validated (letters, digits, underscores; consumers also "-", "." and
// ":"; at most 63 bytes, the length at which PostgreSQL would silently cut
// it) and quoted.
//
// # Telemetry
//
// The outbox, the relay and the inbox report OpenTelemetry spans and
// metrics through the providers of the broker.Telemetry that
// outbox.Options, outbox.RelayOptions and Options embed (default: the
// global ones); only the OpenTelemetry API is used. One
// event's spans form one trace, from the transaction that wrote it to the
// commit of its effect:
//
//   - Outbox.Add starts a "create" span (kind producer) per message under
//     the caller's span and stores its context with the row, in the row's
//     headers, as the W3C traceparent and tracestate (no schema change; a
//     row given a traceparent of its own keeps it, as the parent);
//   - the relay's "publish" span is a child of that stored context, around
//     Topic.Publish, whose "send" span (package broker) is its child; the
//     message carries the creation context through every driver;
//   - Inbox.Handle's "inbox CONSUMER" span is a child of the span in its
//     ctx (Subscription.Run's "process" span), or else of the message's
//     creation context; "inbox claim", "handler" and "inbox commit" are its
//     children. It carries wary.inbox.result (applied, duplicate, stale,
//     gap, parked, held, failed, dead_lettered), wary.consumer,
//     messaging.message.id, wary.aggregate.id and wary.aggregate.version.
//     In a shared transaction (Options.Batch) each call keeps its span and
//     its "handler" child; "inbox claim" and "inbox commit" are children
//     of the span of the call that led the transaction.
//
// Metrics: wary.inbox.results (by wary.consumer and wary.inbox.result,
// counted by Handle, plus "replayed" for
// parked messages replayed), wary.inbox.ack_after_commit
// (ErrAckAfterCommit) and wary.inbox.parked (parked and held);
// the relay's wary.relay.publish.duration (each Publish, error.type on
// failure) and wary.relay.commit_to_publish.duration (row creation to
// confirmed publish) histograms, in seconds; and, while Relay.Run runs,
// the gauges wary.outbox.backlog, wary.outbox.oldest_unsent.age (seconds)
// and wary.outbox.quarantined, read with the store's outbox health at each
// collection, and for a streaming relay (postgres.SourceOptions.Stream)
// wary.outbox.stream.lag (bytes of log its slot retains beyond its
// confirmed position), wary.outbox.stream.lag_age (seconds) and the
// counter wary.outbox.stream.released (slots dropped over the WAL budget,
// postgres.SourceOptions.WALBudget).
package idem
