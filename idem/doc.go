// Package idem is wary's safety net for consumers on at-least-once brokers:
// an inbox that makes each message's effect happen once, version checks and
// state-transition guards that keep duplicate, stale and out-of-order events
// from overwriting newer state, and a park where what cannot be applied
// waits for an operator.
//
// Package idem knows no database and no broker driver. It works on a
// Store[Tx], implemented by idem/postgres (Tx is pgx.Tx) and idem/sqlite
// (Tx is *sql.Tx), and on *broker.Delivery values from any driver.
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
// again; the failed delivery is nacked with a delay from Options.Backoff and
// never acknowledged (an error marked with broker.Permanent is
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
//   - Retention at least the redelivery horizon: claims are purged after
//     Options.Retention (Inbox.Purge), and a copy arriving after that would
//     run again. NewInbox refuses a retention shorter than the
//     subscription's Capabilities.RedeliveryHorizon unless
//     Options.AllowShortRetention says otherwise.
//
// The message ID is the producer's stable logical ID (broker.Message.ID);
// two messages with different IDs are different messages to the inbox,
// even with the same body. Events that carry an aggregate version are also
// protected across IDs by the version check below.
//
// HandleBatch claims and applies up to N deliveries in one transaction with
// the same guarantees, which raises throughput where commits are expensive.
// If one handler fails, the batch is rolled back and retried without it.
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
// is missing) and VersionMissing (no row). Versioned wraps this in an inbox
// handler: applied events run the user's Apply in the same transaction;
// a gap is retried with backoff and parked after Options.MaxAttempts.
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
// the park (Inbox.Parked), replays an aggregate in order (Inbox.Replay,
// Versioned.Replay), or discards messages (Inbox.Discard).
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
package idem
